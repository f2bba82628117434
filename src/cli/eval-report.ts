/**
 * The `xcompact eval --report` page: one self-contained HTML file (no script, no external
 * resource) with, per transcript and window, the table the command prints, a cost × needed
 * recall chart (one point per policy) and the request size of every step per policy, both as
 * inline SVG.
 */
import { basename } from 'node:path';
import type { WindowEval } from '../eval';
import { rowsOf, verdictOf, type EvaluatedTranscript, type Prices } from './eval-rows';
import { redactSecrets } from '../services/redaction';

const COLORS = ['#d6336c', '#1c7ed6', '#2f9e44', '#f08c00', '#7048e8', '#0b7285', '#868e96'];

// Every text of the page passes here: its secrets are redacted before it is escaped (and a
// text shown in part, a file's base name, is redacted whole before it is cut).
const esc = (s: string) => redactSecrets(s).text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(1)}%`);
const int = (n: number) => Math.round(n).toLocaleString('en-US');

/** Round axis maximum: 1, 2 or 5 × a power of ten, at least `x`. */
function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function table(w: WindowEval): string {
  const head = [
    'policy',
    'cost',
    'cache-miss tokens',
    'compactions',
    'prunes',
    'peak ÷ window',
    'requests over the window',
    'needed recall',
    'recall after compaction',
    'intent recall',
  ];
  const rows = rowsOf(w)
    .map(
      (r) =>
        `<tr${r.overWindow > 0 ? ' class="invalid"' : ''}><th scope="row">${esc(r.policy)}${r.overWindow > 0 ? ' <small>(invalid: over the window)</small>' : ''}</th><td>$${r.cost.toFixed(2)}</td><td>${int(r.cacheMissTokens)}</td><td>${r.compactions}</td><td>${r.prunes}</td>` +
        `<td>${r.peakShare.toFixed(2)}</td><td>${r.overWindow}</td><td>${pct(r.neededRecall)}</td><td>${pct(r.recallAfterCompaction)}</td><td>${pct(r.intentRecall)}</td></tr>`,
    )
    .join('\n');
  return `<table><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join('')}</tr></thead><tbody>\n${rows}\n</tbody></table>\n<p class="verdict">${esc(verdictOf(w).line)}</p>`;
}

const W = 560;
const H = 300;
const M = { left: 64, right: 16, top: 16, bottom: 44 };
const plotW = W - M.left - M.right;
const plotH = H - M.top - M.bottom;

function axes(xMax: number, yMax: number, xLabel: string, yLabel: string, xFmt: (v: number) => string, yFmt: (v: number) => string): string {
  const ticks = [0, 0.25, 0.5, 0.75, 1];
  const grid = ticks
    .map((t) => {
      const y = M.top + plotH * (1 - t);
      const x = M.left + plotW * t;
      return (
        `<line x1="${M.left}" x2="${M.left + plotW}" y1="${y}" y2="${y}" class="grid"/>` +
        `<text x="${M.left - 6}" y="${y + 4}" text-anchor="end">${yFmt(t * yMax)}</text>` +
        `<text x="${x}" y="${M.top + plotH + 16}" text-anchor="middle">${xFmt(t * xMax)}</text>`
      );
    })
    .join('');
  return (
    `${grid}<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${M.top + plotH}" class="axis"/>` +
    `<line x1="${M.left}" x2="${M.left + plotW}" y1="${M.top + plotH}" y2="${M.top + plotH}" class="axis"/>` +
    `<text x="${M.left + plotW / 2}" y="${H - 6}" text-anchor="middle" class="label">${esc(xLabel)}</text>` +
    `<text x="14" y="${M.top + plotH / 2}" text-anchor="middle" class="label" transform="rotate(-90 14 ${M.top + plotH / 2})">${esc(yLabel)}</text>`
  );
}

function legend(names: readonly string[]): string {
  return `<p class="legend">${names.map((n, i) => `<span><i style="background:${COLORS[i % COLORS.length]}"></i>${esc(n)}</span>`).join(' ')}</p>`;
}

/** Cost (x) against needed recall (y): one point per policy; up and to the left is better. */
function costRecallChart(w: WindowEval, id: string): string {
  // Policies that sent requests over the window are invalid: left out of the frontier.
  const all = rowsOf(w);
  const rows = all.filter((r) => r.overWindow === 0);
  if (rows.length === 0) {
    return `<svg id="${id}" class="chart cost-recall" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="no valid policy"><text x="${W / 2}" y="${H / 2}" text-anchor="middle" class="label">every policy sent requests over the window: none is plotted</text></svg>`;
  }
  const xMax = niceMax(Math.max(...rows.map((r) => r.cost)) * 1.1);
  const at = rows.map((r) => ({ x: M.left + (plotW * r.cost) / xMax, y: M.top + plotH * (1 - r.neededRecall) }));
  const points = rows
    .map((r, i) => {
      const { x, y } = at[i]!;
      return `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="6" fill="${COLORS[all.indexOf(r) % COLORS.length]}" data-policy="${esc(r.policy)}"><title>${esc(r.policy)}: $${r.cost.toFixed(2)}, needed recall ${pct(r.neededRecall)}</title></circle>`;
    })
    .join('');
  // Policies at the same point share one label.
  const labels = new Map<string, { x: number; y: number; names: string[] }>();
  rows.forEach((r, i) => {
    const { x, y } = at[i]!;
    const key = `${Math.round(x / 4)},${Math.round(y / 4)}`;
    const label = labels.get(key) ?? { x, y, names: [] };
    label.names.push(r.policy);
    labels.set(key, label);
  });
  // Right of the point, or left of it in the right half, so the label stays inside the chart;
  // a label that would overprint one already placed (same side, rows overlapping) moves down a line.
  const placed: Array<{ left: boolean; x0: number; x1: number; y: number }> = [];
  const text = [...labels.values()]
    .sort((a, b) => a.y - b.y || a.x - b.x)
    .map((l) => {
      const left = l.x > M.left + plotW / 2;
      const label = l.names.join(', ');
      const width = label.length * 6.2;
      const x0 = left ? l.x - 9 - width : l.x + 9;
      const x1 = x0 + width;
      let y = l.y + 4;
      while (placed.some((p) => Math.abs(p.y - y) < 13 && p.x0 < x1 && x0 < p.x1)) y += 13;
      placed.push({ left, x0, x1, y });
      return `<text x="${(l.x + (left ? -9 : 9)).toFixed(1)}" y="${y.toFixed(1)}" text-anchor="${left ? 'end' : 'start'}" class="point">${esc(label)}</text>`;
    })
    .join('');
  return (
    `<svg id="${id}" class="chart cost-recall" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="cost against needed recall, one point per policy">` +
    `${axes(
      xMax,
      1,
      'cost (US dollars)',
      'needed recall',
      (v) => `$${v.toFixed(2)}`,
      (v) => `${Math.round(v * 100)}%`,
    )}${points}${text}</svg>`
  );
}

/** Tokens of every request, by step, one line per policy, with the window drawn. */
function requestSizeChart(w: WindowEval, id: string): string {
  const steps = Math.max(1, ...w.runs.map((r) => r.records.length));
  const yMax = niceMax(Math.max(w.window, ...w.runs.flatMap((r) => r.records.map((q) => q.tokens))));
  const xOf = (i: number) => M.left + (plotW * i) / Math.max(1, steps - 1);
  const yOf = (t: number) => M.top + plotH * (1 - t / yMax);
  const lines = w.runs
    .map((r, i) => {
      const pts = r.records.map((q, k) => `${xOf(k).toFixed(1)},${yOf(q.tokens).toFixed(1)}`).join(' ');
      return `<polyline points="${pts}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" data-policy="${esc(r.policy)}"><title>${esc(r.policy)}</title></polyline>`;
    })
    .join('');
  const windowLine = `<line x1="${M.left}" x2="${M.left + plotW}" y1="${yOf(w.window).toFixed(1)}" y2="${yOf(w.window).toFixed(1)}" class="window"/><text x="${M.left + plotW - 4}" y="${(yOf(w.window) - 5).toFixed(1)}" text-anchor="end" class="label">window</text>`;
  return (
    `<svg id="${id}" class="chart request-size" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="request tokens per step, one line per policy">` +
    `${axes(
      steps - 1,
      yMax,
      'agent request (step)',
      'request tokens',
      (v) => int(v),
      (v) => int(v),
    )}${windowLine}${lines}</svg>`
  );
}

export function renderEvalReport(results: readonly EvaluatedTranscript[], meta: { prices: Prices }): string {
  const sections = results
    .map((t, ti) =>
      t.windows
        .map((w, wi) => {
          const key = `t${ti}-w${wi}`;
          return (
            `<section><h2>${esc(basename(redactSecrets(t.file).text))} <small>${esc(t.format)}, ${int(t.requests)} requests — window ${int(w.window)} tokens</small></h2>\n${table(w)}\n` +
            `<div class="charts"><figure>${costRecallChart(w, `cost-recall-${key}`)}<figcaption>Cost × needed recall (up and to the left is better)</figcaption></figure>` +
            `<figure>${requestSizeChart(w, `request-size-${key}`)}<figcaption>Request size per step</figcaption></figure></div>\n${legend(w.runs.map((r) => r.policy))}</section>`
          );
        })
        .join('\n'),
    )
    .join('\n');
  const p = meta.prices;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>xcompact eval</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212529}
h1{font-size:20px}h2{font-size:16px;margin-top:32px}h2 small{font-weight:normal;color:#555}
table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 10px;border-bottom:1px solid #dee2e6;text-align:right}
th[scope=row],thead th:first-child{text-align:left}thead th{font-weight:600;border-bottom:2px solid #adb5bd}
.charts{display:flex;flex-wrap:wrap;gap:16px}figure{margin:0}figcaption{color:#555;font-size:12px}
tr.invalid{color:#868e96}p.verdict{font-weight:600}svg text{font-size:11px;fill:#495057}svg .label{font-size:12px;fill:#212529}svg .point{font-size:11px}
.grid{stroke:#e9ecef}.axis{stroke:#868e96}.window{stroke:#c92a2a;stroke-dasharray:4 3}
.legend span{margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
</style></head><body>
<h1>xcompact eval</h1>
<p>Each transcript replayed through xcompact and the simulated peers at each window. Prices per million tokens: input $${p.input}, cache read $${p.cacheRead}, cache write $${p.cacheWrite}, output $${p.output}. Memory measures as defined in docs/memory.md.</p>
${sections}
</body></html>
`;
}
