// A per-replica cache whose entries every replica drops when PostgreSQL
// says they changed (a NOTIFY carrying the key, from a trigger). While the
// LISTEN connection is down it caches nothing, so it can never serve what it
// could not hear being changed, and a value loaded while anything changed
// (or the connection dropped) is handed out but not kept; a TTL bounds any
// entry's age regardless.
import type { JobEventHub } from '../jobs/events.ts';

export class InvalidatedCache<V> {
  private entries = new Map<string, { value: V; at: number }>();
  private enabled = false;
  /** Counts invalidations: a load that overlapped one may have read the old value. */
  private generation = 0;

  constructor(
    hub: JobEventHub,
    channel: string,
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 10_000,
  ) {
    hub.onConnectionChange((connected) => {
      this.enabled = connected; // the hub re-issued LISTEN before saying so
      this.generation++;
      this.entries.clear();
    });
    void hub
      .listen(channel, (key) => {
        this.generation++;
        this.entries.delete(key);
      })
      .then(() => {
        this.enabled = hub.connected;
      });
  }

  /** Drops an entry this process changed itself, so its next read need not wait for the NOTIFY. */
  forget(key: string): void {
    this.generation++;
    this.entries.delete(key);
  }

  async get(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && Date.now() - hit.at <= this.ttlMs) return hit.value;
    const before = this.generation;
    const value = await load();
    if (this.enabled && this.generation === before) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { value, at: Date.now() });
    }
    return value;
  }
}
