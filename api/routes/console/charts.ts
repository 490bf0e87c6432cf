// Charts of the console's overview, drawn here as SVG: no script, no font or
// file from elsewhere, and they arrive over the live socket like the rest of
// the page. One bar (or point) per minute of the last hour; each has a
// <title>, so hovering names the minute and its figures, and the chart's own
// title and description say what it shows to a screen reader.
import { html, type Html } from '../../pages/layout.ts';

export type Series = { name: string; colour: string; values: readonly (number | null)[] };

const W = 640;
const H = 150;
const LEFT = 44;
const BOTTOM = 20;
const TOP = 8;

const niceMax = (max: number) => {
  if (max <= 0) return 1;
  const step = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * step).find((v) => v >= max)!;
};
const fmt = (n: number) => (n >= 1000 ? `${Math.round(n / 100) / 10}k` : String(Math.round(n * 10) / 10));

function frame(
  id: string,
  title: string,
  description: string,
  labels: readonly string[],
  max: number,
  unit: string,
  body: Html,
): Html {
  const plotH = H - TOP - BOTTOM;
  const first = labels[0] ?? '';
  const last = labels.at(-1) ?? '';
  return html`<figure class="chart-box"><svg id="${id}" class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-title ${id}-desc">
<title id="${id}-title">${title}</title><desc id="${id}-desc">${description}</desc>
<line x1="${LEFT}" y1="${TOP}" x2="${W}" y2="${TOP}" stroke="#e3e3e3"/><line x1="${LEFT}" y1="${TOP + plotH / 2}" x2="${W}" y2="${TOP + plotH / 2}" stroke="#e3e3e3"/>
<line x1="${LEFT}" y1="${TOP + plotH}" x2="${W}" y2="${TOP + plotH}" stroke="#888"/>
<text x="${LEFT - 4}" y="${TOP + 4}" text-anchor="end" font-size="11" fill="#555">${fmt(max)}${unit}</text>
<text x="${LEFT - 4}" y="${TOP + plotH / 2 + 4}" text-anchor="end" font-size="11" fill="#555">${fmt(max / 2)}${unit}</text>
<text x="${LEFT - 4}" y="${TOP + plotH + 4}" text-anchor="end" font-size="11" fill="#555">0</text>
<text x="${LEFT}" y="${H - 4}" font-size="11" fill="#555">${first}</text><text x="${W}" y="${H - 4}" text-anchor="end" font-size="11" fill="#555">${last} UTC</text>
${body}</svg><figcaption class="small">${title}</figcaption></figure>`;
}

const legend = (series: readonly Series[]) =>
  html`<p class="legend small">${series.map((s) => html`<span><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${s.colour}"/></svg> ${s.name}</span> `)}</p>`;

/** Stacked bars, one per label. */
export function stackedBars(
  id: string,
  title: string,
  description: string,
  labels: readonly string[],
  series: readonly Series[],
  unit = '',
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
  return html`${frame(id, title, description, labels, max, unit, html`${bars}`)}${legend(series)}`;
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
  return frame(id, title, description, labels, max, unit, html`${paths}${dots}`);
}
