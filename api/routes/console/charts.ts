// Charts of the console's overview, drawn here as SVG: no script, no font or
// file from elsewhere, and they arrive over the live socket like the rest of
// the page. One bar (or point) per minute of the last hour; each has a
// <title>, so hovering names the minute and its figures, and the chart's own
// title and description say what it shows to a screen reader. The SVG holds
// only the plot and scales with its box; the axis labels, the legend and any
// note are HTML inside the chart's own <figure>, so they keep their size
// (layout.ts: .chart-box) at any width and stay with their chart in the grid.
import { html, type Html } from '../../pages/layout.ts';

export type Series = { name: string; colour: string; values: readonly (number | null)[] };

const W = 640;
const H = 150;
// The plot fills the view box; the axis labels beside and below it line up
// with its top, middle and bottom lines (.axis-y in layout.ts).
const LEFT = 0;
const BOTTOM = 1;
const TOP = 1;

const niceMax = (max: number) => {
  if (max <= 0) return 1;
  const step = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * step).find((v) => v >= max)!;
};
const fmt = (n: number) => (n >= 1000 ? `${Math.round(n / 100) / 10}k` : String(Math.round(n * 10) / 10));

const legend = (series: readonly Series[]) =>
  html`<p class="legend small">${series.map((s) => html`<span><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${s.colour}"/></svg> ${s.name}</span> `)}</p>`;

type Frame = {
  id: string;
  title: string;
  description: string;
  labels: readonly string[];
  max: number;
  unit: string;
  series: readonly Series[];
  /** A line under the legend (e.g. what the chart leaves out). */
  note?: Html;
};

function frame(f: Frame, body: Html): Html {
  const plotH = H - TOP - BOTTOM;
  const gridLine = (y: number, colour: string) =>
    html`<line x1="${LEFT}" y1="${y}" x2="${W}" y2="${y}" stroke="${colour}" vector-effect="non-scaling-stroke"/>`;
  return html`<figure class="chart-box"><figcaption class="chart-title">${f.title}</figcaption>
<div class="chart-plot"><div class="axis axis-y" aria-hidden="true"><span class="at-top">${fmt(f.max)}${f.unit}</span><span class="at-mid">${fmt(f.max / 2)}${f.unit}</span><span class="at-bottom">0</span></div>
<svg id="${f.id}" class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${f.id}-title ${f.id}-desc">
<title id="${f.id}-title">${f.title}</title><desc id="${f.id}-desc">${f.description}</desc>
${gridLine(TOP, '#e3e3e3')}${gridLine(TOP + plotH / 2, '#e3e3e3')}${gridLine(TOP + plotH, '#888')}
${body}</svg>
<div class="axis axis-x" aria-hidden="true"><span>${f.labels[0] ?? ''}</span><span>${f.labels.at(-1) ?? ''} UTC</span></div></div>
${legend(f.series)}${f.note ? html`<p class="small muted chart-note">${f.note}</p>` : ''}</figure>`;
}

/** Stacked bars, one per label. */
export function stackedBars(
  id: string,
  title: string,
  description: string,
  labels: readonly string[],
  series: readonly Series[],
  unit = '',
  note?: Html,
): Html {
  const totals = labels.map((_, i) => series.reduce((n, s) => n + (s.values[i] ?? 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const plotH = H - TOP - BOTTOM;
  const slot = (W - LEFT) / Math.max(1, labels.length);
  const bars = labels.map((label, i) => {
    let y = TOP + plotH;
    const parts = series.map((s) => {
      const v = s.values[i] ?? 0;
      const h = (v / max) * plotH;
      y -= h;
      return v > 0
        ? html`<rect x="${(LEFT + i * slot + 0.5).toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, slot - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${s.colour}"/>`
        : '';
    });
    const tip = `${label} UTC: ${series.map((s) => `${s.values[i] ?? 0} ${s.name}`).join(', ')}`;
    return html`<g data-minute="${label}" data-total="${totals[i]}"><title>${tip}</title>${parts}</g>`;
  });
  return frame({ id, title, description, labels, max, unit, series, note }, html`${bars}`);
}

/** A line through the points that have a value (a gap where a minute has none). */
export function line(
  id: string,
  title: string,
  description: string,
  labels: readonly string[],
  s: Series,
  unit = '',
): Html {
  const max = niceMax(Math.max(0, ...s.values.map((v) => v ?? 0)));
  const plotH = H - TOP - BOTTOM;
  const slot = (W - LEFT) / Math.max(1, labels.length);
  const point = (i: number, v: number) => ({
    x: (LEFT + i * slot + slot / 2).toFixed(1),
    y: (TOP + plotH - (v / max) * plotH).toFixed(1),
  });
  const runs: string[][] = [[]];
  const dots = s.values.map((v, i) => {
    if (v === null) {
      runs.push([]);
      return '';
    }
    const { x, y } = point(i, v);
    runs.at(-1)!.push(`${x},${y}`);
    return html`<circle cx="${x}" cy="${y}" r="2.5" fill="${s.colour}" data-minute="${labels[i]}"><title>${labels[i]} UTC: ${fmt(v)}${unit} ${s.name}</title></circle>`;
  });
  const paths = runs
    .filter((r) => r.length > 0)
    .map((r) => html`<polyline points="${r.join(' ')}" fill="none" stroke="${s.colour}" stroke-width="2"/>`);
  return frame({ id, title, description, labels, max, unit, series: [s] }, html`${paths}${dots}`);
}
