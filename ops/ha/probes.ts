// What the HA cluster's waits ask and how they poll: each Patroni's REST API, HAProxy's stats socket and
// PostgreSQL itself, each answer read without throwing, and the loop that repeats a check until a deadline.
import net from 'node:net';
import pg from 'pg';
import { sleep } from '../bench/measure.ts';
import type { Member } from './config.ts';

/** Repeats `check` every `everyMs` until it says true; past the deadline, an error pointing at the logs in `dir`. */
export async function until(
  dir: string,
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean>,
  everyMs = 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`HA cluster: no ${what} within ${timeoutMs / 1000} s (logs in ${dir})`);
    await sleep(everyMs);
  }
}

/** The members HAProxy sends new connections to now (its stats socket: servers UP). */
export async function haproxyRoutedTo(statsSocket: string): Promise<string[]> {
  const csv = await new Promise<string>((resolve, reject) => {
    const socket = net.createConnection(statsSocket);
    let out = '';
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write('show stat\n'));
    socket.on('data', (d: string) => (out += d));
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
    socket.setTimeout(1_000, () => socket.destroy(new Error('HAProxy stats socket timed out')));
  });
  return csv
    .split('\n')
    .map((line) => line.split(','))
    .filter((f) => f[0] === 'postgres-primary' && f[1] !== 'BACKEND' && f[1] !== 'FRONTEND' && f[17] === 'UP')
    .map((f) => f[1]!);
}

/** What a member's Patroni says of itself (null: it does not answer). */
export async function memberState(m: Member): Promise<{ role: string; state: string } | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${m.restPort}/patroni`, { signal: AbortSignal.timeout(1_000) });
    return (await res.json()) as { role: string; state: string };
  } catch {
    return null;
  }
}

/** The member Patroni calls the running primary now (null: none). */
export async function primaryOf(members: readonly Member[]): Promise<Member | null> {
  const answers = await Promise.all(
    members.map(async (m) => {
      try {
        const res = await fetch(`http://127.0.0.1:${m.restPort}/primary`, { signal: AbortSignal.timeout(1_000) });
        return res.status === 200 ? m : null;
      } catch {
        return null;
      }
    }),
  );
  return answers.find((m) => m !== null) ?? null;
}

/** Whether every standby of `members` streams from the leader and is less than 1 MB behind (asked of `asked`). */
export async function standbysCaughtUp(asked: Member, members: readonly Member[]): Promise<boolean> {
  const res = await fetch(`http://127.0.0.1:${asked.restPort}/cluster`, {
    signal: AbortSignal.timeout(1_000),
  });
  const { members: reported } = (await res.json()) as {
    members: Array<{ role: string; state: string; lag?: number | string }>;
  };
  const standbys = reported.filter((m) => m.role !== 'leader');
  return (
    standbys.length === members.length - 1 &&
    standbys.every(
      (m) => (m.state === 'running' || m.state === 'streaming') && typeof m.lag === 'number' && m.lag < 1_048_576,
    )
  );
}

export async function canConnect(port: number): Promise<boolean> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password: 'postgres',
    database: 'postgres',
    connectionTimeoutMillis: 1_000,
  });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Whether `url` connects to a PostgreSQL that is not in recovery (a primary). */
export async function connectsToPrimary(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  try {
    await client.connect();
    const { rows } = await client.query('select pg_is_in_recovery() as standby');
    return rows[0]?.standby === false;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function runQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
