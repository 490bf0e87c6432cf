// Board content (any JSON) as a readable report, for the hosted board and
// the approval page's preview. The mapping, top-level keys of an object:
//   summary, text, body, description  strings -> paragraphs (split on blank lines)
//   metrics   {name: value} or {name: {value, unit}} or [{label|name, value, unit}] -> cards
//             (content is stored as jsonb, which does not keep an object's key
//             order: a list keeps the order of the cards)
//   sections  [{title|heading, ...content}] -> a heading each, its content as a report
//   items     any array -> a list
//   any other key -> a heading (the key) and the value rendered generically.
// Generically: a string is paragraphs, a number or boolean is text, an array
// is a list, an object is a definition list. Everything is HTML-escaped; very
// deep nesting falls back to formatted JSON.
import { html, type Html } from './html.ts';

const TEXT_KEYS = ['summary', 'text', 'body', 'description'];
const MAX_DEPTH = 6;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** "monthly_revenue" / "monthlyRevenue" -> "Monthly revenue". */
export function humanize(key: string): string {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .trim()
    .toLowerCase();
  return words ? words[0]!.toUpperCase() + words.slice(1) : key;
}

function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number')
    return Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: 6 }) : String(v);
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  return String(v);
}

/**
 * A number that never breaks inside a digit group: "1,250,000" stays whole
 * where it fits and, on a narrow card, breaks only after a group separator.
 */
function numberHtml(v: number): Html {
  const groups = scalarText(v).split(',');
  return html`<span class="num">${groups.map((g, i) => (i === 0 ? html`${g}` : html`,<wbr>${g}`))}</span>`;
}

/** Paragraphs split on blank lines; single line breaks kept as <br>. */
export function paragraphs(text: string): Html {
  const parts = text
    .split(/\r?\n\s*\r?\n/)
    .map((p) => p.trim())
    .filter(Boolean);
  return html`${parts.map((p) => html`<p>${p.split(/\r?\n/).map((line, i) => (i === 0 ? html`${line}` : html`<br>${line}`))}</p>`)}`;
}

type Metric = { label: string; value: unknown; unit?: unknown };

function metricsOf(value: unknown): Metric[] | null {
  const one = (label: string, v: unknown): Metric | null => {
    if (isScalar(v)) return { label, value: v };
    if (isObject(v) && 'value' in v && isScalar(v.value))
      return { label: typeof v.label === 'string' ? v.label : label, value: v.value, unit: v.unit };
    return null;
  };
  const list = Array.isArray(value)
    ? value.map((m, i) => (isObject(m) ? one(String(m.label ?? m.name ?? m.title ?? `Metric ${i + 1}`), m) : null))
    : isObject(value)
      ? Object.entries(value).map(([k, v]) => one(humanize(k), v))
      : null;
  return list && list.length > 0 && list.every((m): m is Metric => m !== null) ? list : null;
}

function metricCards(metrics: Metric[]): Html {
  return html`<ul class="cards">${metrics.map(
    (m) => html`
<li class="card"><span class="card-label">${m.label}</span><span class="card-value">${typeof m.value === 'number' ? numberHtml(m.value) : scalarText(m.value)}${isScalar(m.unit) && m.unit !== null ? html` <small>${scalarText(m.unit)}</small>` : ''}</span></li>`,
  )}</ul>`;
}

/** Any JSON value, generically. */
export function renderValue(value: unknown, depth = 0): Html {
  if (depth > MAX_DEPTH) return html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
  if (typeof value === 'string') return value.includes('\n') ? paragraphs(value) : html`<p>${value}</p>`;
  if (isScalar(value) || value === undefined) return html`<p>${scalarText(value)}</p>`;
  if (Array.isArray(value)) {
    if (value.length === 0) return html`<p class="muted">(none)</p>`;
    return html`<ul class="items">${value.map((item) => html`<li>${isScalar(item) ? scalarText(item) : renderValue(item, depth + 1)}</li>`)}</ul>`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return html`<p class="muted">(empty)</p>`;
  return html`<dl>${entries.map(([k, v]) => html`<dt>${humanize(k)}</dt><dd>${isScalar(v) ? scalarText(v) : renderValue(v, depth + 1)}</dd>`)}</dl>`;
}

function section(value: unknown, depth: number, fallbackTitle: string): Html {
  if (!isObject(value)) return html`<section><h3>${fallbackTitle}</h3>${renderValue(value, depth + 1)}</section>`;
  const rawTitle = value.title ?? value.heading ?? value.name;
  const { title: _t, heading: _h, name: _n, ...rest } = value;
  const title = typeof rawTitle === 'string' ? rawTitle : fallbackTitle;
  return html`<section><h3>${title}</h3>${renderReport(typeof rawTitle === 'string' ? rest : value, depth + 1, 'h4')}</section>`;
}

/** A whole report: well-known keys first (in mapping order), then the rest. */
export function renderReport(content: unknown, depth = 0, heading: 'h2' | 'h4' = 'h2'): Html {
  if (!isObject(content)) return renderValue(content, depth);
  if (depth > MAX_DEPTH) return renderValue(content, depth);
  const h = (text: string) => (heading === 'h2' ? html`<h2>${text}</h2>` : html`<h4>${text}</h4>`);
  const parts: Html[] = [];
  for (const key of TEXT_KEYS) {
    const v = content[key];
    if (typeof v === 'string') parts.push(paragraphs(v));
  }
  const metrics = 'metrics' in content ? metricsOf(content.metrics) : null;
  if (metrics) parts.push(html`${h('Metrics')}${metricCards(metrics)}`);
  if (Array.isArray(content.sections))
    parts.push(html`${content.sections.map((s, i) => section(s, depth, `Section ${i + 1}`))}`);
  if (Array.isArray(content.items)) parts.push(html`${h('Items')}${renderValue(content.items, depth)}`);
  const known = (k: string) =>
    (TEXT_KEYS.includes(k) && typeof content[k] === 'string') ||
    (k === 'metrics' && metrics) ||
    ((k === 'sections' || k === 'items') && Array.isArray(content[k]));
  for (const [key, value] of Object.entries(content)) {
    if (known(key)) continue;
    parts.push(html`${h(humanize(key))}${renderValue(value as Json, depth + 1)}`);
  }
  return html`<div class="report">${parts}</div>`;
}
