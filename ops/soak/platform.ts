// The soak's platform: one PostgreSQL (embedded in a scratch directory, or
// DATABASE_URL's), 2 api and 2 worker processes started as `npm run
// start:api` / `start:worker` start them, and a local model provider. Every
// fault the soak injects is a method here; a killed process is started again,
// as a supervisor (systemd, Kubernetes) would.
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { loadConfig, type Config } from '../../core/config.ts';
import { processAlive } from '../../core/db/local-cluster.ts';
import { createDatabasePool, sql, type DatabasePool } from '../../core/db/pool.ts';
import { migrate } from '../../core/db/migrate.ts';
import { spawnEntry, stopAll, waitForHealth, type PlatformProcess } from '../bench/processes.ts';
import { sleep } from '../bench/measure.ts';
import { freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../embedded-postgres.ts';

/** Heartbeats fast enough that a worker stopped for a few seconds counts as dead. */
export const WORKER_TIMING = {
  WORKER_HEARTBEAT_MS: '1000',
  WORKER_STALE_AFTER_MS: '5000',
  WORKER_SWEEP_INTERVAL_MS: '2000',
};

export type Slot = { name: string; kind: 'api' | 'worker'; port: number; proc: PlatformProcess; starts: number };

export class SoakPlatform {
  readonly apis: Slot[] = [];
  readonly workers: Slot[] = [];
  provider!: PlatformProcess;
  db!: DatabasePool;
  url = '';
  baseUrl = '';
  /** The configuration every process of the platform runs with (the seed signs and seals with it too). */
  config!: Config;
  private embedded: EmbeddedDatabase | null = null;
  readonly scratch = mkdtempSync(path.join(tmpdir(), 'platform-soak-'));
  /** Every process's output, one file per process and start; kept when an invariant fails. */
  readonly logs = mkdtempSync(path.join(tmpdir(), 'platform-soak-logs-'));
  private env: Record<string, string> = {};
  /** Processes that ended without being killed or stopped by the soak (a process must ride out any outage). */
  readonly unexpectedExits: string[] = [];
  private readonly ending = new Set<PlatformProcess>();
  private stopping = false;

  constructor(private readonly logger: Logger) {}

  get ownsDatabase(): boolean {
    return this.embedded !== null;
  }

  async start(options: { databaseUrl?: string | undefined; turnSeconds: number }): Promise<void> {
    if (options.databaseUrl) this.url = options.databaseUrl;
    else {
      // Durable settings (not the tests' unsafe ones): with synchronous_commit
      // off, an immediate shutdown loses commits that were already answered.
      this.embedded = await startEmbeddedPostgres({ directory: path.join(this.scratch, 'pg'), logger: this.logger });
      this.url = this.embedded.url;
    }
    await migrate(this.url, this.logger);
    this.db = await createDatabasePool(this.url, { maximumPoolSize: 4 });
    const providerPort = await freePort();
    this.provider = spawnEntry('model provider', 'ops/bench/stream-provider.ts', {
      PORT: String(providerPort),
      STREAM_TOKENS_PER_S: '20',
      STREAM_SECONDS: String(options.turnSeconds),
    });
    await this.provider.logged('listening');
    const ports = await Promise.all([freePort(), freePort()]);
    // One BASE_URL for both apis, as behind a load balancer: the tokens' issuer.
    this.baseUrl = `http://127.0.0.1:${ports[0]}`;
    this.env = {
      // Development, not production: the billing sandbox (Stripe's API, answered
      // from PostgreSQL) is refused in production, and the soak needs it.
      DATABASE_URL: this.url,
      NODE_ENV: 'development',
      BILLING_SANDBOX: 'true',
      STRIPE_WEBHOOK_SECRET: 'whsec_soak_signing_secret_0123456789',
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      DATA_DIR: this.scratch,
      PLATFORM_JWT_SECRET: Buffer.alloc(32, 7).toString('base64'),
      DATA_ENCRYPTION_KEY: Buffer.alloc(32, 8).toString('base64'),
      BASE_URL: this.baseUrl,
      HOST: '127.0.0.1',
      OPENAI_BASE_URL: `http://127.0.0.1:${providerPort}/v1`,
      PROVIDER_ALLOW_PRIVATE_URLS: 'true',
      AGENT_API_RATE_LIMIT: '1000000',
      SHUTDOWN_TIMEOUT_MS: '10000',
      ...WORKER_TIMING,
    };
    this.config = loadConfig(this.env);
    for (const [i, port] of ports.entries()) this.apis.push(this.spawn(`api ${i + 1}`, 'api', port));
    for (let i = 0; i < 2; i++) this.workers.push(this.spawn(`worker ${i + 1}`, 'worker', 0));
    await Promise.all([
      ...this.apis.map((s) => waitForHealth(s.proc, s.port)),
      ...this.workers.map((s) => s.proc.logged('worker started')),
    ]);
  }

  private spawn(name: string, kind: 'api' | 'worker', port: number, starts = 1): Slot {
    const entry = kind === 'api' ? 'api/server.ts' : 'workers/runner.ts';
    // The apis log warnings only (every request at info would cost the load its CPU).
    const proc = spawnEntry(
      name,
      entry,
      kind === 'api' ? { ...this.env, PORT: String(port), LOG_LEVEL: 'warn' } : this.env,
    );
    mkdirSync(this.logs, { recursive: true });
    const file = createWriteStream(path.join(this.logs, `${name.replace(' ', '-')}.${starts}.log`));
    proc.child.stdout!.on('data', (d) => file.write(d));
    proc.child.stderr!.on('data', (d) => file.write(d));
    proc.child.once('close', () => file.end());
    void proc.exited.then((code) => {
      if (!this.stopping && !this.ending.has(proc))
        this.unexpectedExits.push(`${name} (start ${starts}) exited with ${code ?? proc.child.signalCode}`);
    });
    return { name, kind, port, proc, starts };
  }

  /** Every api port that answers now (a killed one comes back after its restart). */
  livePorts(): number[] {
    return this.apis
      .filter((s) => s.proc.child.exitCode === null && s.proc.child.signalCode === null)
      .map((s) => s.port);
  }

  /** SIGKILL, then start it again once it is gone (as a supervisor would). */
  async kill(slot: Slot): Promise<void> {
    this.ending.add(slot.proc);
    slot.proc.child.kill('SIGKILL');
    await slot.proc.exited;
    const next = this.spawn(slot.name, slot.kind, slot.port, slot.starts + 1);
    Object.assign(slot, next);
    if (slot.kind === 'api') await waitForHealth(slot.proc, slot.port);
    else await slot.proc.logged('worker started');
  }

  /** SIGSTOP for `ms` (past the heartbeat: the others count it dead and take its jobs), then SIGCONT. */
  async pause(slot: Slot, ms: number): Promise<void> {
    slot.proc.child.kill('SIGSTOP');
    await sleep(ms);
    slot.proc.child.kill('SIGCONT');
  }

  /** Stops PostgreSQL (fast: pg_ctl's default; immediate: SIGQUIT, crash recovery at start) and starts it again. */
  async restartPostgres(mode: 'fast' | 'immediate', downMs: number): Promise<void> {
    const embedded = this.embedded;
    if (!embedded) throw new Error('restartPostgres needs the embedded PostgreSQL');
    if (mode === 'fast') await embedded.stop();
    else {
      const pid = Number(readFileSync(path.join(embedded.directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGQUIT');
      while (processAlive(pid)) await sleep(50);
    }
    await sleep(downMs);
    this.embedded = await startEmbeddedPostgres({
      directory: embedded.directory,
      port: embedded.port,
      logger: this.logger,
    });
  }

  /** Ends every LISTEN connection from the server side (each process must LISTEN again). */
  async dropListenConnections(): Promise<number> {
    const ended = await this.db.anyFirst(sql.type(z.object({ pid: z.number() }))`
      select pid from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%' and pg_terminate_backend(pid)`);
    return ended.length;
  }

  /** Resident memory (MiB) of every platform process now, by name. */
  memory(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const slot of [...this.apis, ...this.workers]) {
      const pid = slot.proc.child.pid;
      if (!pid || slot.proc.child.exitCode !== null) continue;
      try {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
        out[`${slot.name}#${slot.starts}`] = kb / 1024;
      } catch {
        // it is between a kill and its restart
      }
    }
    return out;
  }

  /** Stops everything; the process logs and the database stay only if asked (an invariant failed). */
  async stop(keepLogs = false): Promise<void> {
    this.stopping = true;
    await stopAll([...this.apis, ...this.workers].map((s) => s.proc));
    if (this.provider) await stopAll([this.provider]);
    await this.db?.end().catch(() => undefined);
    await this.embedded?.stop().catch(() => undefined);
    if (keepLogs) return;
    rmSync(this.scratch, { recursive: true, force: true });
    rmSync(this.logs, { recursive: true, force: true });
  }
}
