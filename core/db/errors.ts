// Database errors arrive wrapped: slonik around pg, AggregateError for the
// several addresses of one host. These look through the whole chain.

/** Every error in the chain (causes and aggregated errors), each once, at most 10. */
export function* errorChain(error: unknown): Generator<object> {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.size < 10) {
    const e = queue.shift();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    yield e;
    const { cause, errors } = e as { cause?: unknown; errors?: unknown };
    queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
}

/** The SQLSTATE PostgreSQL sent with a database error, if any in the chain. */
export function sqlState(error: unknown): string | undefined {
  for (const e of errorChain(error)) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}
