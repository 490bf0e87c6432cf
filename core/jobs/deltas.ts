// Stream deltas: the pieces of a model's answer as they arrive, from the
// worker running the turn to every websocket that follows the job, without
// a row write each. A worker process gathers the deltas of all its turns for
// DELTA_FLUSH_MS and sends them with NOTIFY on the job_deltas channel (as
// few notifications as fit, one statement), on a connection of its own
// (delta-connection.ts), so they never wait behind a claim, a completion or
// a lock; each api process's LISTEN connection hands them to the subscribers
// of their jobs (api/routes/ws), and reads only the deltas of those jobs.
//
// A delta names its job, its attempt and its offset in the answer, so a
// client places it exactly, drops what it already has, and starts over when
// a new attempt begins. Deltas are best effort: one lost while a LISTEN
// connection reconnects is not sent again as such; the api that misses a
// piece (or comes in mid-stream) asks on job_stream_replay, and the worker
// running the turn sends its text so far again from offset 0. The job's
// progress (written now and then) and its final state carry the text too.
// One publisher per process sends one flush at a time, so the deltas of one
// job arrive in order.
import type { Logger } from 'pino';
import { DeltaConnection } from './delta-connection.ts';
import { StreamMemory } from './stream-memory.ts';

export const DELTA_CHANNEL = 'job_deltas';
/** Apis ask here (payload: job ids, comma-separated) for a stream's text so far. */
export const REPLAY_CHANNEL = 'job_stream_replay';
/** How long a worker gathers deltas before it sends them. */
export const DELTA_FLUSH_MS = 15;
/** NOTIFY payloads must stay under 8000 bytes. */
const MAX_PAYLOAD_BYTES = 7_800;
/** Deltas kept while the database is slow; past this, the oldest are dropped (the final state has the text). */
const MAX_BUFFERED = 200_000;

export type Delta = { jobId: string; attempt: number; offset: number; text: string };

type Queryable = { query: (text: string, values: unknown[]) => Promise<unknown> };

/** Splits text into pieces of at most `max` UTF-16 units without cutting a surrogate pair. */
function pieces(text: string, max: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + max);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code <= 0xdbff) end--;
    out.push(text.slice(i, end));
    i = end;
  }
  return out;
}

/**
 * The NOTIFY payloads for these deltas, in order, each under the size limit:
 * one line per delta, `<jobId> <attempt> <offset> <text as a JSON string>`
 * (JSON escapes every line break), so a listener reads the job id of a line
 * before anything else. Consecutive deltas of one job and attempt are joined
 * first.
 */
export function encodeDeltas(deltas: readonly Delta[]): string[] {
  const joined: Delta[] = [];
  for (const d of deltas) {
    const last = joined.at(-1);
    if (last && last.jobId === d.jobId && last.attempt === d.attempt && last.offset + last.text.length === d.offset)
      last.text += d.text;
    else joined.push({ ...d });
  }
  const payloads: string[] = [];
  let lines: string[] = [];
  let size = 0;
  const close = () => {
    if (lines.length > 0) payloads.push(lines.join('\n'));
    lines = [];
    size = 0;
  };
  for (const d of joined) {
    // A piece of at most 1,000 characters is at most ~6,100 bytes as JSON (escapes included).
    let offset = d.offset;
    for (const text of pieces(d.text, 1_000)) {
      const line = `${d.jobId} ${d.attempt} ${offset} ${JSON.stringify(text)}`;
      const bytes = Buffer.byteLength(line) + 1;
      if (size + bytes > MAX_PAYLOAD_BYTES) close();
      lines.push(line);
      size += bytes;
      offset += text.length;
    }
  }
  close();
  return payloads;
}

/** The deltas of one job_deltas notification; malformed lines are skipped. */
export function decodeDeltas(payload: string): Delta[] {
  return decodeDeltasOf(payload, () => true);
}

/** The deltas of one job_deltas notification of the jobs `wanted` accepts (the others' text is not even decoded). */
export function decodeDeltasOf(payload: string, wanted: (jobId: string) => boolean): Delta[] {
  if (payload.startsWith('{')) return decodeJsonDeltas(payload).filter((d) => wanted(d.jobId));
  const out: Delta[] = [];
  for (let start = 0; start < payload.length; ) {
    let end = payload.indexOf('\n', start);
    if (end < 0) end = payload.length;
    const idEnd = payload.indexOf(' ', start);
    if (idEnd > start && idEnd < end) {
      const jobId = payload.slice(start, idEnd);
      if (wanted(jobId)) {
        const delta = decodeLine(jobId, payload.slice(idEnd + 1, end));
        if (delta) out.push(delta);
      }
    }
    start = end + 1;
  }
  return out;
}

function decodeLine(jobId: string, rest: string): Delta | null {
  const a = rest.indexOf(' ');
  const b = a < 0 ? -1 : rest.indexOf(' ', a + 1);
  if (b < 0) return null;
  const attempt = Number(rest.slice(0, a));
  const offset = Number(rest.slice(a + 1, b));
  let text: unknown;
  try {
    text = JSON.parse(rest.slice(b + 1));
  } catch {
    return null;
  }
  if (!Number.isInteger(attempt) || !Number.isInteger(offset) || offset < 0 || typeof text !== 'string') return null;
  return { jobId, attempt, offset, text };
}

/** The JSON form workers sent before (`{"d":[[jobId, attempt, offset, text], ...]}`), during an upgrade. */
function decodeJsonDeltas(payload: string): Delta[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return [];
  }
  const items = (parsed as { d?: unknown }).d;
  if (!Array.isArray(items)) return [];
  const out: Delta[] = [];
  for (const item of items) {
    if (!Array.isArray(item) || item.length !== 4) continue;
    const [jobId, attempt, offset, text] = item as unknown[];
    if (
      typeof jobId === 'string' &&
      typeof attempt === 'number' &&
      typeof offset === 'number' &&
      typeof text === 'string'
    )
      out.push({ jobId, attempt, offset, text });
  }
  return out;
}

/**
 * One per worker process: gathers deltas and sends them every DELTA_FLUSH_MS,
 * remembering each turn's text so far to send it again when an api asks.
 */
export class DeltaPublisher {
  private buffer: Delta[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** Flushes run one after another on this chain, so each job's deltas leave in order. */
  private chain: Promise<void> = Promise.resolve();
  private dropped = 0;
  private readonly sent = new StreamMemory();
  /** The connection this publisher opened (connect()), ended by stop(). */
  private own: DeltaConnection | null = null;
  /** Notifications and deltas sent, for the bench. */
  readonly stats = { notifications: 0, deltas: 0, replays: 0 };

  /** A publisher on a connection of its own (ended by stop()), which also hears the apis' replay requests. */
  static connect(connectionString: string, logger: Logger): DeltaPublisher {
    let publisher!: DeltaPublisher;
    const connection = new DeltaConnection(connectionString, logger, {
      channel: REPLAY_CHANNEL,
      handler: (payload) => publisher.replay(payload.split(',')),
    });
    publisher = new DeltaPublisher(connection, logger);
    publisher.own = connection;
    connection.start().catch((error) => logger.warn({ err: error }, 'stream deltas: could not connect yet'));
    return publisher;
  }

  constructor(
    private readonly db: Queryable,
    private readonly logger: Logger,
    private readonly flushMs = DELTA_FLUSH_MS,
  ) {}

  publish(delta: Delta): void {
    if (delta.text.length === 0) return;
    this.sent.take(delta);
    this.push(delta);
  }

  /** The attempt streaming this job ended here: its text so far is forgotten (what is gathered still goes out). */
  ended(jobId: string): void {
    this.sent.forget(jobId);
  }

  /** Sends the text so far of these jobs (those this process streams) again, from offset 0, after what is gathered. */
  replay(jobIds: readonly string[]): void {
    for (const jobId of jobIds) {
      const sofar = this.sent.get(jobId);
      if (!sofar) continue;
      this.stats.replays++;
      this.push(sofar);
    }
  }

  private push(delta: Delta): void {
    this.buffer.push(delta);
    if (this.buffer.length > MAX_BUFFERED) {
      this.buffer.splice(0, this.buffer.length - MAX_BUFFERED);
      if (this.dropped++ === 0)
        this.logger.warn(
          'stream deltas: the database is not keeping up; dropping the oldest (final states still carry the whole answers)',
        );
    }
    this.timer ??= setTimeout(() => void this.flush(), this.flushMs);
  }

  /** Sends what is gathered, after any flush still under way; resolves once it is sent. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.chain = this.chain.then(() => this.sendBuffered());
    return this.chain;
  }

  private async sendBuffered(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    const payloads = encodeDeltas(batch);
    try {
      await this.db.query(
        `select pg_notify('${DELTA_CHANNEL}', p) from unnest($1::text[]) with ordinality as x(p, n) order by n`,
        [payloads],
      );
      this.stats.notifications += payloads.length;
      this.stats.deltas += batch.length;
    } catch (error) {
      this.logger.debug(
        { err: error, deltas: batch.length },
        'stream deltas: a flush failed; those deltas are lost (the final state has the text)',
      );
    }
  }

  /** Sends what is left (unless the database is away), then ends the connection if it is the publisher's own. */
  async stop(): Promise<void> {
    this.own?.impatient();
    await this.flush();
    await this.own?.end();
  }
}
