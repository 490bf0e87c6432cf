// Chat sends/s as a server sees them: the 32 clients run in a child process
// of their own (as real clients would be elsewhere), so the api's event loop
// does only the api's work. The child keeps one request in flight per
// keep-alive connection and reads each response just far enough to count it
// (status line and content-length), so it costs little of the machine.
import { spawn } from 'node:child_process';
import net from 'node:net';
import type { Throughput } from './measure.ts';

export type ChatLoad = {
  /** api ports; connection n goes to ports[n % ports.length] */
  ports: number[];
  token: string;
  tenantId: string;
  /** sends go round-robin over these sessions */
  sessions: string[];
  seconds: number;
  connections: number;
  /** makes idempotency keys unique across runs */
  keyPrefix: string;
};

type Result = { ok: number; failed: number; seconds: number; firstFailure?: string };

/** Runs the load in a child process; throws if any send was not a 202. */
export async function chatSendLoad(load: ChatLoad): Promise<Throughput> {
  const child = spawn(process.execPath, ['--import', 'tsx', import.meta.filename], {
    env: { PATH: process.env.PATH ?? '', BENCH_CHAT_LOAD: JSON.stringify(load) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (data: string) => (output += data));
  const code = await new Promise<number | null>((resolve, reject) => child.once('exit', resolve).once('error', reject));
  if (code !== 0) throw new Error(`the chat load client exited with ${code}: ${output.slice(-2000)}`);
  const result = JSON.parse(output) as Result;
  if (result.failed > 0)
    throw new Error(`${result.failed} chat sends were not accepted; the first answer: ${result.firstFailure}`);
  return { ops: result.ok, seconds: result.seconds, perSecond: result.ok / result.seconds };
}

async function runLoad(load: ChatLoad): Promise<Result> {
  let n = 0;
  const result: Result = { ok: 0, failed: 0, seconds: 0 };
  const request = () => {
    const k = ++n;
    const body = JSON.stringify({ sessionId: load.sessions[k % load.sessions.length], message: `message ${k}` });
    return (
      `POST /api/chat/send HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${load.token}\r\nx-tenant-id: ${load.tenantId}\r\n` +
      `idempotency-key: ${load.keyPrefix}-${k}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    );
  };
  const started = performance.now();
  const deadline = started + load.seconds * 1000;
  await Promise.all(
    Array.from(
      { length: load.connections },
      (_, c) =>
        new Promise<void>((resolve, reject) => {
          const socket = net.connect(load.ports[c % load.ports.length]!, '127.0.0.1');
          socket.setNoDelay(true);
          let buffered = '';
          socket.once('connect', () => socket.write(request()));
          socket.on('error', reject);
          socket.on('data', (data) => {
            buffered += data;
            for (;;) {
              const head = buffered.indexOf('\r\n\r\n');
              if (head < 0) return;
              const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buffered.slice(0, head))?.[1] ?? 0);
              if (buffered.length < head + 4 + length) return;
              const response = buffered.slice(0, head + 4 + length);
              buffered = buffered.slice(head + 4 + length);
              if (response.startsWith('HTTP/1.1 202')) result.ok++;
              else if (result.failed++ === 0) result.firstFailure = response.slice(0, 1000);
              if (performance.now() < deadline) socket.write(request());
              else return void socket.end(() => resolve());
            }
          });
        }),
    ),
  );
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

if (process.env.BENCH_CHAT_LOAD && process.argv[1] === import.meta.filename) {
  process.stdout.write(JSON.stringify(await runLoad(JSON.parse(process.env.BENCH_CHAT_LOAD) as ChatLoad)));
}
