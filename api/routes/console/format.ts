// How the console shows times, ages, states and JSON. Times are UTC, said so
// on the page; the script adds each one's local time as its tooltip.
import { html, type Html } from '../../pages/layout.ts';

/** A timestamp as "2026-11-26 13:45:07 UTC" in a <time> element; "—" for none. */
export function utc(ts: string | null | undefined): Html | string {
  if (!ts) return '—';
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return '—';
  return html`<time datetime="${d.toISOString()}">${d.toISOString().slice(0, 19).replace('T', ' ')} UTC</time>`;
}

/** A duration in seconds as "850 ms", "12 s", "4 min", "3 h 5 min", "2 d". */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.round(s / 86400)} d`;
}

export const stateBadge = (state: string) => html`<span class="state state-${state}">${state}</span>`;

/** JSON pretty-printed in a <pre>; "—" for null. */
export function jsonBlock(value: unknown): Html | string {
  if (value === null || value === undefined) return '—';
  return html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
}

export const shortId = (id: string) => id.slice(0, 8);

/** The console's path with a query string of the given (non-empty) values. */
export function withQuery(path: string, query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') params.set(k, v);
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** A keyset cursor "created_at|id" as the database wrote it (microseconds kept). */
const CURSOR_TIME = /^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d{1,6})?([+-]\d\d(:\d\d)?|Z)?$/;
export function parseCursor(value: string | undefined): { createdAt: string; id: string } | undefined {
  if (!value) return undefined;
  const [createdAt, id, ...rest] = value.split('|');
  if (rest.length || !createdAt || !id || !CURSOR_TIME.test(createdAt) || !UUID.test(id)) return undefined;
  return { createdAt, id };
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
