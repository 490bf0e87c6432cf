// Finite HTTP limits: a body trickled byte by byte is cut off when the request
// timeout passes (nothing stored), and a keep-alive socket serves a bounded
// number of requests.
import { connect, type Socket } from 'node:net';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { startTestServer } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const server = await startTestServer(t, databaseUrl, { REQUEST_TIMEOUT_MS: '1000', MAX_REQUESTS_PER_SOCKET: '3' });
const { port } = new URL(server.url);

function open(): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    socket.on('data', (chunk) => (data += chunk));
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.once('connect', () => resolve({ socket, received: () => data, closed }));
    socket.once('error', reject);
  });
}

t.test('a slow body is cut off at the request timeout with 408, and nothing is stored', async (t) => {
  const { socket, received, closed } = await open();
  t.teardown(() => socket.destroy());
  const body = JSON.stringify({ name: 'Slow', email: 'slow@example.test', message: 'x'.repeat(50) });
  socket.write(
    `POST /api/contact/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  let sent = 0;
  const trickle = setInterval(() => {
    if (sent < body.length && !socket.destroyed) socket.write(body[sent++]!);
  }, 300);
  t.teardown(() => clearInterval(trickle));
  await closed;
  clearInterval(trickle);
  // The whole body would take 30 s at this pace: the server closed first.
  t.ok(sent < body.length, `the connection was closed with ${sent} of ${body.length} bytes sent`);
  t.match(received(), /^HTTP\/1\.1 408/, 'answered 408 Request Timeout');
  const stored = await server.db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from contact_submissions`,
  );
  t.equal(stored, 0, 'nothing stored');
});

t.test('a keep-alive socket serves at most MAX_REQUESTS_PER_SOCKET requests', async (t) => {
  const { socket, received } = await open();
  t.teardown(() => socket.destroy());
  const answers = () => received().match(/HTTP\/1\.1 \d{3}/g) ?? [];
  for (let i = 0; i < 4; i++) socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await waitFor('four answers', async () => answers().length >= 4);
  // Node marks the last allowed answer `Connection: close` and refuses what follows with 503.
  t.same(answers(), ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 503']);
  t.match(received(), /connection: close/i, 'the third answer tells the client to close');
});
