// A replicated PostgreSQL on one machine, as production runs one on three:
// etcd, three Patroni members each running Debian's PostgreSQL in a scratch
// directory (synchronous replication: Patroni's synchronous_mode), and
// HAProxy sending the platform's DATABASE_URL to whichever member Patroni's
// REST API calls the primary. Every process is a child of this one, on
// 127.0.0.1 ports; stop() (and this process's exit) ends them all. The
// faults a machine or an operator causes are methods here.
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sleep } from '../bench/measure.ts';
import { freePort } from '../embedded-postgres.ts';
import { postgresUserIds } from '../embedded-postgres-cluster.ts';
import { haproxyConfig, patroniConfig, type Member } from './config.ts';
import { postgresBinDir } from './packages.ts';
import {
  canConnect,
  connectsToPrimary,
  haproxyRoutedTo,
  memberState,
  primaryOf,
  runQuery,
  standbysCaughtUp,
  until,
} from './probes.ts';
import { etcdArguments, postmasterPid, spawnLogged, stopProcesses, type Proc } from './processes.ts';

export class HaCluster {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'platform-ha-'));
  readonly members: Member[] = [];
  /** postgres://... through HAProxy: always the primary, whichever it is. */
  url = '';
  private etcd: Proc | null = null;
  private etcdPorts = { client: 0, peer: 0 };
  private haproxy: Proc | null = null;
  private patronis = new Map<string, Proc>();
  private readonly ids = postgresUserIds();
  private readonly binDir = postgresBinDir();

  /** synchronous: false runs asynchronous replication (to measure what it loses). */
  constructor(readonly options: { synchronous: boolean } = { synchronous: true }) {}

  async start(): Promise<void> {
    if (!this.binDir)
      throw new Error('no PostgreSQL 14 or newer under /usr/lib/postgresql (apt-get install postgresql)');
    if ('uid' in this.ids) chownSync(this.dir, this.ids.uid!, this.ids.gid!);
    this.etcdPorts = { client: await freePort(), peer: await freePort() };
    await this.startEtcd();
    for (let i = 0; i < 3; i++) {
      this.members.push({
        name: `pg${i}`,
        pgPort: await freePort(),
        restPort: await freePort(),
        dataDir: path.join(this.dir, `pg${i}`),
      });
    }
    for (const m of this.members) {
      writeFileSync(
        this.configFile(m),
        patroniConfig(m, {
          dir: this.dir,
          binDir: this.binDir,
          etcdPort: this.etcdPorts.client,
          synchronous: this.options.synchronous,
        }),
      );
      if ('uid' in this.ids) chownSync(this.configFile(m), this.ids.uid!, this.ids.gid!);
    }
    // The first member bootstraps; the others clone it once it leads.
    this.startPatroni(this.members[0]!);
    const first = await this.waitForPrimary(120_000);
    for (const m of this.members.slice(1)) this.startPatroni(m);
    const proxyPort = await freePort();
    writeFileSync(path.join(this.dir, 'haproxy.cfg'), haproxyConfig(proxyPort, this.members, this.statsSocket));
    this.haproxy = this.spawnLogged('haproxy', 'haproxy', ['-f', path.join(this.dir, 'haproxy.cfg'), '-db']);
    const admin = `postgres://postgres:postgres@127.0.0.1:${proxyPort}`;
    // HAProxy counts a server up until its checks say otherwise: wait until it routes to the primary alone.
    await this.waitForRoutedTo(first, 30_000);
    await this.untilConnects(`${admin}/postgres`, 60_000);
    // The first connections through a just-started HAProxy may still be cut: try again.
    await this.until('the platform database created', 30_000, async () => {
      await runQuery(`${admin}/postgres`, 'create database platform').catch((error: Error) => {
        if (!/already exists/.test(error.message)) throw error;
      });
      return true;
    });
    this.url = `${admin}/platform`;
    await this.waitForHealthy(120_000);
  }

  private get statsSocket(): string {
    return path.join(this.dir, 'haproxy.sock');
  }

  /** The members HAProxy sends new connections to now (its stats socket: servers UP). */
  async routedTo(): Promise<string[]> {
    return haproxyRoutedTo(this.statsSocket);
  }

  private configFile(m: Member): string {
    return path.join(this.dir, `${m.name}.yml`);
  }

  private spawnLogged(name: string, command: string, args: string[], asPostgres = false): Proc {
    return spawnLogged(this.dir, this.ids, name, command, args, asPostgres);
  }

  private async startEtcd(): Promise<void> {
    const { client } = this.etcdPorts;
    this.etcd = this.spawnLogged('etcd', 'etcd', etcdArguments(this.dir, this.etcdPorts));
    await this.until('etcd answering', 30_000, async () => (await fetch(`http://127.0.0.1:${client}/health`)).ok);
  }

  private startPatroni(m: Member): void {
    this.patronis.set(m.name, this.spawnLogged(m.name, 'patroni', [this.configFile(m)], true));
  }

  /** What a member's Patroni says of itself (null: it does not answer). */
  async memberState(m: Member): Promise<{ role: string; state: string } | null> {
    return memberState(m);
  }

  /** Until HAProxy sends new connections to `m` alone. */
  async waitForRoutedTo(m: Member, timeoutMs: number): Promise<void> {
    await this.until(
      `HAProxy routing to ${m.name} alone`,
      timeoutMs,
      async () => {
        const up = await this.routedTo();
        return up.length === 1 && up[0] === m.name;
      },
      50,
    );
  }

  /** The member Patroni calls the running primary now (null: none). */
  async primary(): Promise<Member | null> {
    return primaryOf(this.members);
  }

  async waitForPrimary(timeoutMs: number, not?: Member): Promise<Member> {
    let found: Member | null = null;
    await this.until(
      'a primary',
      timeoutMs,
      async () => {
        found = await this.primary();
        return found !== null && found !== not;
      },
      100,
    );
    return found!;
  }

  /** The standby a switchover goes to: the synchronous one (only it may be promoted), else any running standby. */
  async switchoverCandidate(timeoutMs: number): Promise<Member> {
    if (this.options.synchronous) return this.waitForSyncStandby(timeoutMs);
    const primary = await this.waitForPrimary(timeoutMs);
    return this.members.find((m) => m !== primary)!;
  }

  /** Until a standby is the synchronous one (Patroni's /sync answers 200 there). */
  async waitForSyncStandby(timeoutMs: number): Promise<Member> {
    let found: Member | null = null;
    await this.until(
      'a synchronous standby',
      timeoutMs,
      async () => {
        for (const m of this.members) {
          const res = await fetch(`http://127.0.0.1:${m.restPort}/sync`, { signal: AbortSignal.timeout(1_000) }).catch(
            () => null,
          );
          if (res?.status === 200) found = m;
        }
        return found !== null;
      },
      200,
    );
    return found!;
  }

  /**
   * Every member running and caught up (after a fault, before the next): a
   * standby still replaying what it missed holds up the primary's shutdown
   * at a switchover (its walsender waits for it), which would blur the next
   * fault's figures.
   */
  async waitForHealthy(timeoutMs: number): Promise<void> {
    await this.until(
      'all three members running and caught up',
      timeoutMs,
      async () => {
        const states = await Promise.all(this.members.map((m) => this.memberState(m)));
        if (!states.every((s) => s?.state === 'running') || (await this.primary()) === null) return false;
        return standbysCaughtUp(this.members[0]!, this.members);
      },
      250,
    );
    if (this.options.synchronous) await this.waitForSyncStandby(timeoutMs);
  }

  /** A machine lost: SIGKILL its Patroni and its PostgreSQL, no goodbye. */
  async lose(m: Member): Promise<void> {
    const proc = this.patronis.get(m.name);
    const postmaster = postmasterPid(m);
    proc?.child.kill('SIGKILL');
    if (postmaster) {
      try {
        process.kill(postmaster, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await proc?.exited;
    // The backends notice their postmaster is gone and exit; wait until the port is free.
    await this.until(`${m.name}'s PostgreSQL gone`, 30_000, async () => !(await canConnect(m.pgPort)), 100);
  }

  /** The lost machine back: its Patroni starts again and rejoins (pg_rewind when it must). */
  bringBack(m: Member): void {
    const pid = path.join(m.dataDir, 'postmaster.pid');
    if (existsSync(pid)) rmSync(pid);
    this.startPatroni(m);
  }

  /** A planned switchover to `candidate`, as an operator does it. */
  switchover(leader: Member, candidate: Member): string {
    return execFileSync(
      'patronictl',
      ['-c', this.configFile(leader), 'switchover', '--leader', leader.name, '--candidate', candidate.name, '--force'],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: this.dir, LANG: 'C.UTF-8' },
        timeout: 60_000,
      },
    );
  }

  async restartEtcd(downMs: number): Promise<void> {
    this.etcd?.child.kill('SIGTERM');
    await this.etcd?.exited;
    await sleep(downMs);
    await this.startEtcd();
  }

  private async untilConnects(url: string, timeoutMs: number): Promise<void> {
    await this.until('PostgreSQL through HAProxy', timeoutMs, () => connectsToPrimary(url), 200);
  }

  private async until(what: string, timeoutMs: number, check: () => Promise<boolean>, everyMs = 200): Promise<void> {
    await until(this.dir, what, timeoutMs, check, everyMs);
  }

  /** Stops everything and removes the scratch directory (kept when asked, for its logs). */
  async stop(keep = false): Promise<void> {
    const procs = [this.haproxy, ...this.patronis.values(), this.etcd].filter((p): p is Proc => p !== null);
    await stopProcesses(procs, this.members);
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}
