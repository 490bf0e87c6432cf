// A tiny HTTP server base for the fake channel APIs: reads the body, lets the
// handler answer, and records an answer as delivered only when the response
// was fully written (a client killed mid-request did not get it).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export type Scripted = { status?: number; body?: unknown; headers?: Record<string, string>; hold?: Promise<void> };
export type Handled = Scripted & { onDelivered?: () => void };
export type FakeRequest = { method: string; path: string; headers: http.IncomingHttpHeaders; raw: string };

export async function startFakeServer(t: Test, handle: (req: FakeRequest) => Handled | Promise<Handled>) {
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      void (async () => {
        const out = await handle({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, raw });
        if (out.hold) await out.hold;
        if (res.destroyed || req.socket.destroyed) return; // the caller went away before the answer
        res.writeHead(out.status ?? 200, { 'content-type': 'application/json', ...out.headers });
        res.end(JSON.stringify(out.body ?? {}), () => out.onDelivered?.());
      })().catch((error: Error) => {
        res.writeHead(500);
        res.end(String(error.message));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url, server };
}
