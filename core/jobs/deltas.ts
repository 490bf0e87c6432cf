// Stream deltas: the pieces of a model's answer as they arrive, from the
// worker running the turn to every websocket that follows the job, without
// a row write each. A worker process gathers the deltas of all its turns for
// DELTA_FLUSH_MS and sends them with NOTIFY on the job_deltas channel (as
// few notifications as fit, one statement); each api process's LISTEN
// connection hands them to the subscribers of their jobs (api/routes/ws).
//
// A delta names its job, its attempt and its offset in the answer, so a
// client places it exactly, drops what it already has, and starts over when
// a new attempt begins. Deltas are best effort: one lost while a LISTEN
// connection reconnects is not sent again, but the job's progress (written
// now and then) and its final state carry the text, and the final state the
// whole answer. One publisher per process sends one flush at a time, so the
// deltas of one job arrive in order.
import type { Logger } from 'pino';

export const DELTA_CHANNEL = 'job_deltas';
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
 * The NOTIFY payloads for these deltas, in order: `{"d":[[jobId, attempt,
 * offset, text], ...]}`, each under the size limit. Consecutive deltas of one
 * job and attempt are joined first.
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
  let items: string[] = [];
  let size = 8;
  const close = () => {
    if (items.length > 0) payloads.push(`{"d":[${items.join(',')}]}`);
    items = [];
    size = 8;
  };
  for (const d of joined) {
    // A piece of at most 1,000 characters is at most ~6,100 bytes as JSON (escapes included).
    let offset = d.offset;
    for (const text of pieces(d.text, 1_000)) {
      const item = JSON.stringify([d.jobId, d.attempt, offset, text]);
      const bytes = Buffer.byteLength(item) + 1;
      if (size + bytes > MAX_PAYLOAD_BYTES) close();
      items.push(item);
      size += bytes;
      offset += text.length;
    }
  }
  close();
  return payloads;
}

/** The deltas of one job_deltas notification; malformed items are skipped. */
export function decodeDeltas(payload: string): Delta[] {
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

/** One per worker process: gathers deltas and sends them every DELTA_FLUSH_MS. */
export class DeltaPublisher {
  private buffer: Delta[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** Flushes run one after another on this chain, so each job's deltas leave in order. */
  private chain: Promise<void> = Promise.resolve();
  private dropped = 0;
  /** Notifications and deltas sent, for the bench. */
  readonly stats = { notifications: 0, deltas: 0 };

  constructor(
    private readonly db: Queryable,
    private readonly logger: Logger,
    private readonly flushMs = DELTA_FLUSH_MS,
  ) {}

  publish(delta: Delta): void {
    if (delta.text.length === 0) return;
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

  async stop(): Promise<void> {
    await this.flush();
  }
}

/** How long a stream's text is kept after its last delta, and how much text in all. */
const STREAM_IDLE_MS = 120_000;
const STREAM_MAX_CHARS = 16_000_000;

/**
 * What an api process heard each job's current attempt stream so far, so a
 * subscriber that comes mid-stream starts from the beginning (bounded: the
 * oldest streams go first, one idle for two minutes is forgotten, and a final
 * state forgets it at once).
 */
export class StreamMemory {
  private readonly texts = new Map<string, { attempt: number; text: string; at: number }>();
  private chars = 0;
  private lastSweep = Date.now();

  add(d: Delta): void {
    const now = Date.now();
    let entry = this.texts.get(d.jobId);
    if (!entry || d.attempt > entry.attempt) {
      if (entry) this.chars -= entry.text.length;
      if (d.offset !== 0) {
        this.forget(d.jobId); // missed its beginning: nothing whole to offer
        return;
      }
      entry = { attempt: d.attempt, text: '', at: now };
      this.texts.set(d.jobId, entry);
    }
    if (d.attempt < entry.attempt) return;
    if (d.offset + d.text.length > entry.text.length && d.offset <= entry.text.length) {
      const added = d.text.slice(entry.text.length - d.offset);
      entry.text += added;
      this.chars += added.length;
    }
    entry.at = now;
    // Map order is insertion order: re-insert so the oldest-touched come first.
    this.texts.delete(d.jobId);
    this.texts.set(d.jobId, entry);
    if (this.chars > STREAM_MAX_CHARS || now - this.lastSweep > STREAM_IDLE_MS / 4) this.sweep(now);
  }

  get(jobId: string): Delta | null {
    const entry = this.texts.get(jobId);
    return entry?.text ? { jobId, attempt: entry.attempt, offset: 0, text: entry.text } : null;
  }

  forget(jobId: string): void {
    const entry = this.texts.get(jobId);
    if (!entry) return;
    this.chars -= entry.text.length;
    this.texts.delete(jobId);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [jobId, entry] of this.texts) {
      if (this.chars <= STREAM_MAX_CHARS && now - entry.at < STREAM_IDLE_MS) break;
      this.forget(jobId);
    }
  }
}
