// The console's queue sample on an idle service: a real worker runs the
// sampler as its cron item does, and the sample's depth counts no upkeep job
// (the sampler itself, running; the dead-worker sweep's next run, waiting):
// those are counted apart, and the overview's cards and depth chart leave
// them out and say so.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../core/accounts/users.ts';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { ConsoleClient } from '../helpers/console.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const { db, url } = await startTestServer(t, databaseUrl);
const worker = await startTestWorker(t, databaseUrl);

const Sample = z.object({
  ready: z.number(),
  running: z.number(),
  waiting: z.number(),
  oldest_ready_s: z.number().nullable(),
  upkeep: z.number().nullable(),
});

t.test("an idle service's queue depth counts no upkeep job", async (t) => {
  await waitFor('the dead-worker sweep has its next run in the queue', () =>
    db.exists(sql.unsafe`select from graphile_worker.jobs where task_identifier = 'maintenance.dead_workers'`),
  );
  // As the cron item fires it: the minute in the payload.
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 2 * 60_000);
  await worker.runner.addJob('console.sample_queue', { _cron: { ts: minute.toISOString() } });
  const sample = await waitFor('the sample of that minute', () =>
    db.maybeOne(
      sql.type(Sample)`select ready, running, waiting, oldest_ready_s::float8, upkeep from queue_samples
        where at = ${minute.toISOString()}`,
    ),
  );
  t.same(
    { ready: sample.ready, running: sample.running, waiting: sample.waiting, oldest: sample.oldest_ready_s },
    { ready: 0, running: 0, waiting: 0, oldest: null },
    'no work in the queue: nothing ready, running or waiting',
  );
  t.ok(sample.upkeep !== null && sample.upkeep >= 2, `upkeep counted apart (${sample.upkeep}): the sampler, the sweep`);

  await createUser(db, { email: 'op@example.test', password: 'correct horse battery staple', operator: true });
  const operator = new ConsoleClient(url);
  await operator.signIn('op@example.test', 'correct horse battery staple');
  const page = (await operator.get('/console')).text;
  const label = minute.toISOString().slice(11, 16);
  t.match(
    page,
    new RegExp(`<g data-minute="${label}" data-total="0"><title>${label} UTC: 0 ready, 0 running, 0 waiting</title>`),
    'the depth chart shows that minute empty',
  );
  t.match(
    page,
    /<span id="depth-upkeep">Leaves out the platform's own upkeep \(its scheduled tasks, this sampler among them\): \d+ open at the last sample\.<\/span>/,
    'and says what it leaves out',
  );
  const card = (id: string) =>
    new RegExp(`id="${id}"><span class="card-label">[^<]*</span><span class="card-value num">(\\d+)<`).exec(page)?.[1];
  t.same(
    ['total-ready', 'total-running', 'total-waiting'].map(card),
    ['0', '0', '0'],
    'the cards above count no upkeep either',
  );
  t.match(
    page,
    /<tr data-kind="maintenance\.dead_workers"><td><a [^>]*>maintenance\.dead_workers<\/a> <span class="muted small">upkeep<\/span>/,
    'the table lists the upkeep, marked',
  );
});
