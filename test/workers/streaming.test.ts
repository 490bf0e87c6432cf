// 200 chat turns streaming at once in one worker process (its I/O pool)
// against a local provider that speaks the OpenAI protocol: every websocket
// subscriber sees each answer's deltas in order (each continuing where the
// last ended, from offset 0), and then one final state that carries the
// whole answer. The turns wait at the provider until all 200 are in the
// worker, so they really run at once.
import t from 'tap';
import { startTestServerWithFakeOpenAI } from '../helpers/app.ts';
import { createMember, withOwnOpenAIKey } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { TestSocket, type Received } from '../helpers/ws.ts';

const TURNS = 200;
const SOCKETS = 4;
const api = await startTestServerWithFakeOpenAI(t, 'sk-stream-key-1234');
const { app, db, config, openai, databaseUrl, overrides } = api;
const member = await createMember(db, 'admin');
await withOwnOpenAIKey(db, config, member, 'sk-stream-key-1234');
const headers = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
const WORDS = Array.from({ length: 20 }, (_, i) => `word${i + 1}`).join(' ');
const expected = (message: string) => `${message}: ${WORDS}`;

t.test(
  `${TURNS} streaming turns at once in one worker: ordered deltas, then one final state with the whole answer`,
  async (t) => {
    const worker = await startTestWorker(t, databaseUrl, { ...overrides, WORKER_IO_CONCURRENCY: String(TURNS + 50) });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    openai.setDefault({ reply: (r) => expected(r.messages!.at(-1)!.content), chunks: 20, delayMs: 20, gate });
    t.teardown(() => openai.setDefault({}));

    const jobs: Array<{ jobId: string; message: string }> = [];
    for (let i = 0; i < TURNS; i++) {
      const sessionId = (
        await app.inject({
          method: 'POST',
          url: '/api/chat/sessions',
          headers,
          payload: { model: 'openai/gpt-4o-mini' },
        })
      ).json().id;
      const message = `turn ${i}`;
      const sent = await app.inject({
        method: 'POST',
        url: '/api/chat/send',
        headers: { ...headers, 'idempotency-key': `stream-key-${i}` },
        payload: { sessionId, message },
      });
      jobs.push({ jobId: sent.json().jobId, message });
    }
    const sockets = await Promise.all(
      Array.from({ length: SOCKETS }, () => TestSocket.connect(api.wsUrl, member.token)),
    );
    t.teardown(() => {
      for (const s of sockets) s.close();
    });
    for (const [i, job] of jobs.entries()) sockets[i % SOCKETS]!.send({ type: 'subscribe', jobId: job.jobId });

    // A subscription is live once its first state arrived (docs/jobs.md): only then may the answers start.
    const live = (i: number, jobId: string) =>
      sockets[i % SOCKETS]!.messages.some((m) => m.type === 'job' && (m.job as { id: string }).id === jobId);
    await waitFor('every subscription to be live', async () => jobs.every((job, i) => live(i, job.jobId)), 60_000);
    await waitFor(`all ${TURNS} turns to be in the worker at once`, async () => worker.load().io === TURNS, 60_000);
    t.equal(worker.load().io, TURNS, `${TURNS} turns running at once in one worker process`);
    open();

    const done = (s: TestSocket) =>
      s.messages.filter(
        (m) => m.type === 'job' && ['succeeded', 'failed'].includes((m.job as { status: string }).status),
      ).length;
    await waitFor('every final state', async () => sockets.reduce((n, s) => n + done(s), 0) === TURNS, 60_000);

    let ordered = 0;
    let whole = 0;
    for (const [i, job] of jobs.entries()) {
      const mine = sockets[i % SOCKETS]!.messages.filter(
        (m: Received) => (m.type === 'job' && (m.job as { id: string }).id === job.jobId) || m.type === 'deltas',
      );
      const finals = mine.filter(
        (m) => m.type === 'job' && ['succeeded', 'failed'].includes((m.job as { status: string }).status),
      );
      const lastFinal = mine.lastIndexOf(finals[0]!);
      const deltas = mine.flatMap((m, at) =>
        m.type === 'deltas'
          ? (m.deltas as Array<{ jobId: string; offset: number; text: string }>)
              .filter((d) => d.jobId === job.jobId)
              .map((d) => ({ ...d, at }))
          : [],
      );
      let text = '';
      let inOrder = true;
      for (const d of deltas) {
        if (d.offset !== text.length || d.at > lastFinal) inOrder = false;
        text += d.text;
      }
      const result = (finals[0]?.job as { result?: { text?: string } } | undefined)?.result;
      if (finals.length === 1 && inOrder && text === expected(job.message)) ordered++;
      else
        t.comment(
          `job ${i}: finals ${finals.length}, in order ${inOrder}, text ${JSON.stringify(text)}, deltas ${JSON.stringify(deltas.map((d) => [d.offset, d.text, d.at]))}, final at ${lastFinal}, all sockets ${sockets.flatMap((s) => s.messages.filter((m) => m.type === 'deltas').flatMap((m) => (m.deltas as Array<{ jobId: string; offset: number }>).filter((d) => d.jobId === job.jobId).map((d) => d.offset))).join(',')}`,
        );
      if (result?.text === expected(job.message)) whole++;
    }
    t.equal(
      ordered,
      TURNS,
      'every subscriber saw its deltas in order, before one final state, and they make the answer',
    );
    t.equal(whole, TURNS, 'every final state carries the whole answer');
  },
);
