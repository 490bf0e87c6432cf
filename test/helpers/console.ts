// A person at the operator console over plain HTTP: keeps the console
// cookie, reads each page's CSRF token, signs in and posts forms as the
// browser would (the browser tests drive the same pages in Chromium).
import WebSocket from 'ws';

export type ConsoleResponse = { status: number; text: string; location: string | null; headers: Headers };

export class ConsoleClient {
  cookie = '';
  constructor(readonly url: string) {}

  private remember(res: Response) {
    const set = res.headers.get('set-cookie');
    if (set?.startsWith('console_session=')) this.cookie = set.split(';')[0]!;
  }

  async get(path: string): Promise<ConsoleResponse> {
    const res = await fetch(`${this.url}${path}`, {
      headers: this.cookie ? { cookie: this.cookie } : {},
      redirect: 'manual',
    });
    this.remember(res);
    return { status: res.status, text: await res.text(), location: res.headers.get('location'), headers: res.headers };
  }

  async post(path: string, form: Record<string, string>): Promise<ConsoleResponse> {
    const res = await fetch(`${this.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(this.cookie ? { cookie: this.cookie } : {}) },
      body: new URLSearchParams(form).toString(),
    });
    this.remember(res);
    return { status: res.status, text: await res.text(), location: res.headers.get('location'), headers: res.headers };
  }

  /** The CSRF token of the first form on a page. */
  static csrfOf(page: string): string {
    const m = /name="csrf" value="([^"]+)"/.exec(page);
    if (!m) throw new Error('no CSRF token on the page');
    return m[1]!;
  }

  async signIn(email: string, password: string): Promise<ConsoleResponse> {
    const page = await this.get('/console');
    return this.post('/console/sign-in', { csrf: ConsoleClient.csrfOf(page.text), email, password, next: '/console' });
  }

  /** Posts an action form of a page (its CSRF token) with a reason. */
  async act(pagePath: string, action: string, reason: string): Promise<ConsoleResponse> {
    const page = await this.get(pagePath);
    return this.post(action, { csrf: ConsoleClient.csrfOf(page.text), reason });
  }

  /** A live socket as the console page opens it (same origin, the cookie). */
  live(origin = this.url): Promise<{ ws: WebSocket; next: (match: (html: string) => boolean) => Promise<string> }> {
    const ws = new WebSocket(`${this.url.replace(/^http/, 'ws')}/console/live`, {
      headers: { cookie: this.cookie, origin },
    });
    const seen: string[] = [];
    let waiters: Array<{ match: (html: string) => boolean; resolve: (html: string) => void }> = [];
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { type: string; html: string };
      if (m.type !== 'live') return;
      seen.push(m.html);
      waiters = waiters.filter((w) => {
        if (!w.match(m.html)) return true;
        w.resolve(m.html);
        return false;
      });
    });
    const next = (match: (html: string) => boolean) => {
      const found = seen.find(match);
      if (found) return Promise.resolve(found);
      return new Promise<string>((resolve) => waiters.push({ match, resolve }));
    };
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve({ ws, next }));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }
}
