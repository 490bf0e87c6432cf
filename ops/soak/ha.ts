// The soak's --ha faults, on the replicated PostgreSQL of ops/ha/cluster.ts:
// the primary's machine lost (SIGKILL of its Patroni and its PostgreSQL; the
// machine comes back later as a standby), a planned switchover (patronictl),
// a standby lost and back, etcd restarted. For each failover it measures
// the time without a primary (from the fault until HAProxy routes to the new
// one) and the time from the fault to the first chat send accepted after it
// (sent after the fault, answered 202).
import { sleep } from '../bench/measure.ts';
import type { HaCluster } from '../ha/cluster.ts';
import type { Sent } from './chat.ts';
import type { Window } from './invariants.ts';

export const HA_FAULT_KINDS = ['lose-primary', 'switchover', 'lose-standby', 'restart-etcd'] as const;
export type HaFaultKind = (typeof HA_FAULT_KINDS)[number];
export type HaFault = { atMs: number; kind: HaFaultKind; label: string };
export type HaRecovery = {
  kind: HaFaultKind;
  at: number;
  /** When the cluster was whole again (every member running and caught up). */
  wholeAt: number;
  noPrimaryMs: number | null;
  /** From the fault to the first chat send sent after it and accepted. */
  firstSendMs: number | null;
  /** The longest time around the fault in which no chat send was accepted (sends go out 4 a second). */
  gapMs: number | null;
  detail: string;
};

const LABELS: Record<HaFaultKind, string> = {
  'lose-primary': "the primary's machine lost (SIGKILL of its Patroni and PostgreSQL), back as a standby 20 s later",
  switchover: 'planned switchover to the synchronous standby (patronictl switchover)',
  'lose-standby': 'a standby lost (SIGKILL), back 15 s later',
  'restart-etcd': 'etcd stopped for 5 s and started again',
};

/**
 * The faults spread from 15% to 80% of the run; `kinds` in order, repeated to
 * fill a long run (one fault a minute at most, so each recovers first).
 */
export function haFaultSchedule(durationMs: number, kinds: readonly HaFaultKind[] = HA_FAULT_KINDS): HaFault[] {
  const from = durationMs * 0.15;
  const span = durationMs * 0.65;
  const count = Math.max(kinds.length, Math.min(Math.floor(span / 60_000) + 1, kinds.length * 3));
  const list = Array.from({ length: count }, (_, i) => kinds[i % kinds.length]!);
  return list.map((kind, i) => ({
    kind,
    label: LABELS[kind],
    atMs: Math.round(from + (span * i) / Math.max(1, list.length - 1)),
  }));
}

/** Runs one fault and waits until the cluster is whole again; the window it may answer 503 in. */
export async function runHaFault(
  cluster: HaCluster,
  fault: HaFault,
): Promise<{ recovery: HaRecovery; outage: Window }> {
  const at = Date.now();
  const before = await cluster.waitForPrimary(60_000);
  let noPrimaryMs: number | null = null;
  let detail = '';
  const routedAway = async () => {
    const next = await cluster.waitForPrimary(120_000, before);
    await cluster.waitForRoutedTo(next, 60_000);
    noPrimaryMs = Date.now() - at;
    return next;
  };
  switch (fault.kind) {
    case 'lose-primary': {
      await cluster.lose(before);
      const next = await routedAway();
      detail = `${before.name} lost; ${next.name} primary after ${secs(noPrimaryMs)}`;
      await sleep(Math.max(0, 20_000 - (Date.now() - at)));
      cluster.bringBack(before);
      break;
    }
    case 'switchover': {
      const candidate = await cluster.switchoverCandidate(60_000);
      cluster.switchover(before, candidate);
      const next = await routedAway();
      detail = `${before.name} → ${next.name} in ${secs(noPrimaryMs)}`;
      break;
    }
    case 'lose-standby': {
      const standby = cluster.members.find((m) => m !== before)!;
      await cluster.lose(standby);
      await sleep(15_000);
      cluster.bringBack(standby);
      detail = `${standby.name} lost and back`;
      break;
    }
    case 'restart-etcd':
      await cluster.restartEtcd(5_000);
      detail = 'etcd back';
      break;
  }
  await cluster.waitForHealthy(180_000);
  const whole = Date.now();
  const recovery: HaRecovery = {
    kind: fault.kind,
    at,
    wholeAt: whole,
    noPrimaryMs,
    firstSendMs: null,
    gapMs: null,
    detail: `${detail}; cluster whole after ${secs(whole - at)}`,
  };
  return { recovery, outage: { from: at, to: whole } };
}

/**
 * Fills in each recovery's time to the first send sent after the fault and
 * accepted, and the longest gap between accepted sends from the fault until
 * the cluster was whole (a switchover's outage starts when the old primary
 * stops, a little after the fault began).
 */
export function measureSends(recoveries: HaRecovery[], sent: readonly Sent[]): void {
  const accepted = sent.map((s) => s.acceptedAt).sort((a, b) => a - b);
  for (const r of recoveries) {
    const first = sent.filter((s) => s.sentAt >= r.at).reduce((min, s) => Math.min(min, s.acceptedAt), Infinity);
    r.firstSendMs = Number.isFinite(first) ? first - r.at : null;
    const times = [
      r.at,
      ...accepted.filter((t) => t > r.at && t < r.wholeAt),
      accepted.find((t) => t >= r.wholeAt) ?? r.wholeAt,
    ];
    r.gapMs = times.slice(1).reduce((max, t, i) => Math.max(max, t - times[i]!), 0);
  }
}

/** Median and worst of each kind's recovery times, as lines to print. */
export function recoveryReport(recoveries: HaRecovery[]): string[] {
  const lines = [
    '| fault | times | without a primary: median / worst | to the first accepted send: median / worst | longest without an accepted send: median / worst |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const kind of HA_FAULT_KINDS) {
    const of = recoveries.filter((r) => r.kind === kind);
    if (of.length === 0) continue;
    const stat = (values: Array<number | null>) => {
      const v = values.filter((x): x is number => x !== null).sort((a, b) => a - b);
      return v.length ? `${secs(v[Math.floor((v.length - 1) / 2)]!)} / ${secs(v.at(-1)!)}` : '—';
    };
    lines.push(
      `| ${kind} | ${of.length} | ${stat(of.map((r) => r.noPrimaryMs))} | ${stat(of.map((r) => r.firstSendMs))} | ${stat(of.map((r) => r.gapMs))} |`,
    );
  }
  return lines;
}

const secs = (ms: number | null) => (ms === null ? '—' : `${(ms / 1000).toFixed(1)} s`);
