// The text each stream has sent so far, per job: in a worker, of the turns
// it runs (so it can send a stream again from offset 0 when an api asks,
// deltas.ts); in an api, of the jobs its sockets follow (so a subscriber
// that comes mid-stream starts from the beginning, events.ts).
import type { Delta } from './deltas.ts';

/**
 * How long a stream's text is kept after its last delta (longer than any
 * pause within one answer: a stream forgotten mid-answer could not be sent
 * again), and how much text in all.
 */
const STREAM_IDLE_MS = 30 * 60_000;
const STREAM_MAX_CHARS = 16_000_000;

/** What a delta adds to the text known so far. */
export type Placed =
  /** The part of the delta that continues the text (offset = the length known before). */
  | { delta: Delta }
  /** Nothing new: already known, or of an older attempt. */
  | 'known'
  /** It does not continue the text: the beginning, or a piece in between, was missed. */
  | 'gap';

/**
 * Bounded: the oldest streams go first, one idle for half an hour is
 * forgotten, and the owner forgets a stream once its job is final.
 */
export class StreamMemory {
  private readonly texts = new Map<string, { attempt: number; text: string; at: number }>();
  private chars = 0;
  private lastSweep = Date.now();

  /** Adds a delta; says what of it is new. */
  take(d: Delta): Placed {
    const now = Date.now();
    let entry = this.texts.get(d.jobId);
    if (!entry || d.attempt > entry.attempt) {
      if (entry) this.forget(d.jobId);
      if (d.offset !== 0) return 'gap'; // missed its beginning: nothing whole to offer
      entry = { attempt: d.attempt, text: '', at: now };
      this.texts.set(d.jobId, entry);
    }
    if (d.attempt < entry.attempt) return 'known';
    const known = entry.text.length;
    if (d.offset > known) return 'gap';
    entry.at = now;
    // Map order is insertion order: re-insert so the oldest-touched come first.
    this.texts.delete(d.jobId);
    this.texts.set(d.jobId, entry);
    if (d.offset + d.text.length <= known) return 'known';
    const added = d.text.slice(known - d.offset);
    entry.text += added;
    this.chars += added.length;
    if (this.chars > STREAM_MAX_CHARS || now - this.lastSweep > STREAM_IDLE_MS / 4) this.sweep(now);
    return { delta: { jobId: d.jobId, attempt: d.attempt, offset: known, text: added } };
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
