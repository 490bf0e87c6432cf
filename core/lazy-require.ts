// Packages most processes never use, loaded at their first use instead of at
// start: each costs every api, worker and test process tens of milliseconds
// of CPU to load (undici ~100 ms, yaml, otplib, pino-pretty ~30 ms each),
// and start time is what scaling out and restarts wait for. require() keeps
// the first use synchronous.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** A loader that requires `name` once, at its first call. */
export function lazyRequire<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
