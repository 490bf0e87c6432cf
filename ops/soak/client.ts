// HTTP as the soak's clients see it: each request goes to one of the api
// processes that are up (round robin, as a load balancer would), and every
// answer is counted by status. A server error (5xx) is kept with its time, so
// the invariants can tell a 503 during a PostgreSQL outage from a bug.

/** A body sent exactly as given (a signature covers these bytes). */
export class RawBody {
  constructor(readonly text: string) {}
}

/** An answer, and when the attempt that got it was sent. */
export type Answer = { status: number; body: string; headers: Headers; sentAt: number };
export type ServerError = {
  at: number;
  status: number;
  method: string;
  route: string;
  body: string;
  retryAfter: string | null;
};

export class SoakClient {
  readonly statuses = new Map<string, number>();
  readonly serverErrors: ServerError[] = [];
  private next = 0;

  constructor(private readonly ports: () => number[]) {}

  /** One attempt; null when no api could be reached (connection refused or reset: a process was killed). */
  async request(
    method: string,
    route: string,
    options: { headers?: Record<string, string>; body?: unknown; onUnsure?: () => void } = {},
  ): Promise<Answer | null> {
    const ports = this.ports();
    if (ports.length === 0) return this.count('unreachable', null);
    const port = ports[this.next++ % ports.length]!;
    const sentAt = Date.now();
    try {
      const { body } = options;
      // A form (the token endpoint) goes as one, a signed body as it is; any other body as JSON.
      const asIs = body === undefined || body instanceof URLSearchParams;
      const res = await fetch(`http://127.0.0.1:${port}${route}`, {
        method,
        headers: {
          ...(asIs || body instanceof RawBody ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
        body: asIs ? body : body instanceof RawBody ? body.text : JSON.stringify(body),
        // A redirect (the billing sandbox's pages) is an answer, not followed.
        redirect: 'manual',
        signal: AbortSignal.timeout(60_000),
      });
      const text = await res.text();
      if (res.status >= 500) {
        this.serverErrors.push({
          at: Date.now(),
          status: res.status,
          method,
          route: route.replace(/[0-9a-f-]{36}/g, ':id'),
          body: text.slice(0, 300),
          retryAfter: res.headers.get('retry-after'),
        });
      }
      return this.count(String(res.status), { status: res.status, body: text, headers: res.headers, sentAt });
    } catch {
      // Sent, but its connection died (the api was killed): it may have run.
      options.onUnsure?.();
      return this.count('unreachable', null);
    }
  }

  /**
   * Retries what could not be answered (unreachable, 503 with Retry-After,
   * 429) as a client following the contract does, with the same request (and
   * so the same Idempotency-Key); the first real answer is returned.
   */
  async until(
    method: string,
    route: string,
    options: { headers?: Record<string, string>; body?: unknown; deadline: number; onUnsure?: () => void },
  ): Promise<Answer | null> {
    for (;;) {
      const answer = await this.request(method, route, options);
      // A 503 may come from a commit whose outcome PostgreSQL took with it.
      if (answer?.status === 503) options.onUnsure?.();
      const retry = !answer || answer.status === 503 || answer.status === 429;
      if (!retry) return answer;
      if (Date.now() > options.deadline) return answer;
      const after = Number(answer?.headers.get('retry-after') ?? 0);
      await new Promise((r) => setTimeout(r, Math.min(Math.max(after * 1000, 200), 3_000)));
    }
  }

  private count<T>(key: string, value: T): T {
    this.statuses.set(key, (this.statuses.get(key) ?? 0) + 1);
    return value;
  }
}
