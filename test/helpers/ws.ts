// A websocket client that queues what it receives, so a test can await the
// next message that matches.
import WebSocket from 'ws';

export type Received = { type: string; [key: string]: unknown };

export class TestSocket {
  readonly messages: Received[] = [];
  private waiters: Array<{ match: (m: Received) => boolean; resolve: (m: Received) => void }> = [];
  closed: Promise<{ code: number; reason: string }>;
  opened: Promise<void>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as Received;
      this.messages.push(message);
      this.waiters = this.waiters.filter((w) => (w.match(message) ? (w.resolve(message), false) : true));
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
  }

  static async connect(url: string, token?: string): Promise<TestSocket> {
    const socket = new TestSocket(new WebSocket(url, token ? { headers: { authorization: `Bearer ${token}` } } : {}));
    await socket.opened;
    return socket;
  }

  send(message: unknown) {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Resolves with the first message (already received or coming) that matches. */
  next(match: (m: Received) => boolean, timeoutMs = 10_000): Promise<Received> {
    const seen = this.messages.find(match);
    if (seen) {
      this.messages.splice(this.messages.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`)), timeoutMs);
      this.waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer);
          this.messages.splice(this.messages.indexOf(m), 1);
          resolve(m);
        },
      });
    });
  }

  close() {
    this.ws.close();
  }
}

export const isJobMessage = (jobId: string) => (m: Received) => m.type === 'job' && (m.job as { id: string }).id === jobId;
