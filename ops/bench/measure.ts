// Small measuring tools for the bench: throughput over a fixed time with N
// concurrent loops, latency percentiles, the printed table, and a JSON POST.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import path from 'node:path';

export type Throughput = { ops: number; seconds: number; perSecond: number };

/** Runs `op` in `concurrency` loops for `seconds`; returns completed ops per second. */
export async function throughput(
  concurrency: number,
  seconds: number,
  op: (loop: number) => Promise<void>,
): Promise<Throughput> {
  let ops = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < deadline) {
        await op(loop);
        ops++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { ops, seconds: elapsed, perSecond: ops / elapsed };
}

export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export type Row = { figure: string; value: string; baseline: string; ratio: string; target?: string };

export class Report {
  readonly rows: Row[] = [];

  /** `baseline` 'none': a figure on its own (a count, a bound), not compared with anything. */
  add(
    figure: string,
    value: number,
    unit: string,
    baseline?: { name: string; value: number } | 'none',
    target?: string,
  ) {
    const base = baseline === 'none' ? null : baseline;
    this.rows.push({
      figure,
      value: `${format(value)} ${unit}`,
      baseline: base ? `${base.name} ${format(base.value)} ${unit}` : baseline === 'none' ? '' : '(baseline)',
      ratio: base ? `${(value / base.value).toFixed(2)}x` : baseline === 'none' ? '' : '1.00x',
      ...(target ? { target } : {}),
    });
    process.stderr.write(`  measured ${figure}: ${format(value)} ${unit}\n`);
  }

  print() {
    const headers = ['figure', 'value', 'ratio', 'baseline (same run)', 'target'];
    const cells = this.rows.map((r) => [r.figure, r.value, r.ratio, r.baseline, r.target ?? '']);
    const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
    const line = (c: string[]) =>
      c
        .map((v, i) => v.padEnd(widths[i]!))
        .join('  ')
        .trimEnd();
    console.log(line(headers));
    console.log(widths.map((w) => '-'.repeat(w)).join('  '));
    for (const c of cells) console.log(line(c));
  }
}

function format(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(2);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** POSTs a JSON body over a keep-alive agent; the status and the body that came back. */
export function postJson(
  agent: http.Agent,
  port: number,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        agent,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let data = '';
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * With BENCH_PROFILE=<dir>, a CPU profile of this process (the api's event
 * loop) while `work` runs, written to <dir>/<name>.cpuprofile (open it in
 * Chrome's DevTools); else just runs `work`.
 */
export async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_PROFILE;
  if (!dir) return work();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}
