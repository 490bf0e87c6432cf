// The streaming request under the model adapters (core/providers/stream-request.ts)
// against a local server writing server-sent events in the forms the
// standard allows: LF and CRLF, events split across chunks, comments,
// multi-line data, an event field, a last event without its blank line; an
// async handler is awaited in order; an error answer comes back whole. And
// the plain GET of the key check (getOk).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Agent } from 'undici';
import { getOk, postEventStream, HttpStatusError, type StreamEvent } from '../../../core/providers/stream-request.ts';

let script: (res: ServerResponse, req: IncomingMessage) => Promise<void> = async () => undefined;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => void script(res, req));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/stream`;
const dispatcher = new Agent();
t.teardown(async () => {
  await dispatcher.close();
  server.closeAllConnections();
  server.close();
});
const tick = () => new Promise((r) => setTimeout(r, 5));
const collect = async (handler?: (e: StreamEvent) => void | Promise<void>) => {
  const events: StreamEvent[] = [];
  await postEventStream(url, { headers: {}, body: '{}', signal: AbortSignal.timeout(5_000), dispatcher }, (e) => {
    events.push(e);
    return handler?.(e);
  });
  return events;
};

t.test('events in every form the standard allows, split anywhere', async (t) => {
  script = async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const part of [
      ': a comment\n\n',
      'data: one\n',
      '\n',
      'event: named\r\ndata: two\r\n\r\n',
      'data: three',
      ' continued\ndata: line2\n\n',
      'data:four\n\ndata: last',
    ]) {
      res.write(part);
      await tick();
    }
    res.end();
  };
  t.same(await collect(), [
    { event: undefined, data: 'one' },
    { event: 'named', data: 'two' },
    { event: undefined, data: 'three continued\nline2' },
    { event: undefined, data: 'four' },
    { event: undefined, data: 'last' },
  ]);
});

t.test('a promise the handler returns is awaited before the next event, and the stream waits', async (t) => {
  script = async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(Array.from({ length: 20 }, (_, i) => `data: ${i}\n\n`).join(''));
  };
  const seen: string[] = [];
  let busy = false;
  await collect(async (e) => {
    t.notOk(busy, 'one at a time');
    busy = true;
    await tick();
    seen.push(e.data);
    busy = false;
  });
  t.same(
    seen,
    Array.from({ length: 20 }, (_, i) => String(i)),
    'all, in order, before the call returned',
  );
});

t.test('a handler that throws ends the call with its error', async (t) => {
  script = async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: a\n\n');
    await tick();
    res.end('data: b\n\n');
  };
  await t.rejects(
    collect(() => {
      throw new Error('stop here');
    }),
    /stop here/,
  );
});

t.test('an error answer comes back with its status, headers and body', async (t) => {
  script = async (res) =>
    void res
      .writeHead(429, { 'content-type': 'application/json', 'retry-after': '7' })
      .end('{"error":{"message":"slow down"}}');
  const error = await collect().catch((e: unknown) => e);
  t.ok(error instanceof HttpStatusError);
  const { failure } = error as HttpStatusError;
  t.equal(failure.status, 429);
  t.equal(failure.headers.get('Retry-After'), '7');
  t.equal(failure.body, '{"error":{"message":"slow down"}}');
});

t.test('getOk: a 2xx answer is read and dropped, a redirect is followed, an error answer comes back', async (t) => {
  const seen: string[] = [];
  script = async (res, req) => {
    seen.push(`${req.method} ${req.url} ${req.headers.accept} ${req.headers.authorization}`);
    if (req.url === '/v1/moved') return void res.writeHead(301, { location: '/v1/models' }).end();
    if (req.url === '/v1/loop') return void res.writeHead(302, { location: '/v1/loop' }).end();
    if (req.url === '/v1/models')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}');
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
  };
  const base = new URL(url).origin;
  const init = { headers: { authorization: 'Bearer k' }, signal: AbortSignal.timeout(5_000), dispatcher };
  await getOk(`${base}/v1/moved`, init);
  t.same(seen, ['GET /v1/moved application/json Bearer k', 'GET /v1/models application/json Bearer k']);
  const error = await getOk(`${base}/v1/refused`, init).catch((e: unknown) => e);
  t.ok(error instanceof HttpStatusError);
  t.match(error, { failure: { status: 401, body: '{"error":{"message":"no"}}' } });
  seen.length = 0;
  await t.rejects(getOk(`${base}/v1/loop`, init), /more than 20 redirects/, 'a redirect loop fails as fetch fails it');
  t.equal(seen.length, 21);
});
