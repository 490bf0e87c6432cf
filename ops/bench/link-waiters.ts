// link/wait waiters for the channels figure, in a child process of their own
// (as real clients would be elsewhere), so the api's event loop does only the
// api's work: N raw keep-alive connections, each with one GET
// /api/channels/:channel/link/wait in flight. It prints "waiting" once every
// request is written, then, when every answer has come, the time each one
// arrived (epoch milliseconds with fractions: the parent compares them with
// the moment it sent the binding message, on the same clock), and when the
// binding's commit was announced (its NOTIFY, on a connection of its own:
// this process is idle then, so it hears it at once).
import pg from 'pg';
import { spawn } from 'node:child_process';
import net from 'node:net';

export type WaiterLoad = {
  port: number;
  path: string;
  headers: Record<string, string>;
  waiters: number;
  databaseUrl: string;
  channel: string;
};
export type Answered = { answers: Array<{ at: number; status: number }>; notifiedAt: number | null };

/** Starts the waiters; `answered` resolves with each answer's arrival time and status. */
export async function startLinkWaiters(load: WaiterLoad): Promise<{ answered: Promise<Answered> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', import.meta.filename], {
    env: { PATH: process.env.PATH ?? '', BENCH_LINK_WAITERS: JSON.stringify(load) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  let onWaiting!: () => void;
  const waiting = new Promise<void>((resolve) => (onWaiting = resolve));
  child.stdout.setEncoding('utf8').on('data', (data: string) => {
    output += data;
    if (output.startsWith('waiting\n')) onWaiting();
  });
  const exited = new Promise<number | null>((resolve, reject) => child.once('exit', resolve).once('error', reject));
  await Promise.race([
    waiting,
    exited.then((code) => Promise.reject(new Error(`the link waiters exited with ${code}: ${output}`))),
  ]);
  const answered = exited.then((code) => {
    if (code !== 0) throw new Error(`the link waiters exited with ${code}: ${output.slice(-2000)}`);
    return JSON.parse(output.slice('waiting\n'.length)) as Answered;
  });
  return { answered };
}

async function runWaiters(load: WaiterLoad): Promise<void> {
  const head = `GET ${load.path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${Object.entries(load.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  const now = () => performance.timeOrigin + performance.now();
  const listener = new pg.Client({ connectionString: load.databaseUrl });
  await listener.connect();
  let notifiedAt: number | null = null;
  listener.on('notification', () => (notifiedAt ??= now()));
  await listener.query(`listen ${load.channel}`);
  const answers: Array<{ at: number; status: number }> = [];
  const sockets: net.Socket[] = [];
  const done = Array.from(
    { length: load.waiters },
    () =>
      new Promise<void>((resolve, reject) => {
        const socket = net.connect(load.port, '127.0.0.1');
        sockets.push(socket);
        socket.setNoDelay(true);
        socket.once('connect', () => socket.write(head));
        socket.on('error', reject);
        socket.once('data', (data) => {
          // The status line arrives first; the time is when the answer began to arrive.
          answers.push({ at: now(), status: Number(String(data).slice(9, 12)) });
          resolve();
        });
      }),
  );
  // Every request is written once every socket has connected and flushed.
  await new Promise((r) => setTimeout(r, 0));
  process.stdout.write('waiting\n');
  await Promise.all(done);
  // Kept open until every answer is in, as long-poll clients keep theirs
  // (closing each at once would hand the api the closes while it still answers).
  for (const socket of sockets) socket.destroy();
  await listener.end();
  process.stdout.write(JSON.stringify({ answers, notifiedAt } satisfies Answered));
}

if (process.env.BENCH_LINK_WAITERS) await runWaiters(JSON.parse(process.env.BENCH_LINK_WAITERS) as WaiterLoad);
