/**
 * A cost × needed-recall scatter (SVG), one point per policy: right is dearer, up remembers more,
 * so the policy to want is alone in the top-left corner.
 */
export interface ChartPoint {
  name: string;
  cost: number;
  recall: number;
  ours: boolean;
}

const W = 640;
const H = 420;
const PAD = { left: 70, right: 30, top: 50, bottom: 60 };

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function costRecallChart(title: string, points: readonly ChartPoint[]): string {
  const maxCost = Math.max(...points.map((p) => p.cost)) * 1.1 || 1;
  const minRecall = Math.max(0, Math.floor(Math.min(...points.map((p) => p.recall)) * 10) / 10 - 0.1);
  const x = (c: number) => PAD.left + (c / maxCost) * (W - PAD.left - PAD.right);
  const y = (r: number) => H - PAD.bottom - ((r - minRecall) / (1 - minRecall || 1)) * (H - PAD.top - PAD.bottom);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="14">${escape(title)}</text>`,
    `<line x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}" stroke="black"/>`,
    `<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${H - PAD.bottom}" stroke="black"/>`,
    `<text x="${(PAD.left + W - PAD.right) / 2}" y="${H - 18}" text-anchor="middle">cost (US$, the bench's price table)</text>`,
    `<text x="18" y="${(PAD.top + H - PAD.bottom) / 2}" text-anchor="middle" transform="rotate(-90 18 ${(PAD.top + H - PAD.bottom) / 2})">needed recall</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const c = (maxCost * i) / 4;
    out.push(`<text x="${x(c)}" y="${H - PAD.bottom + 16}" text-anchor="middle">$${c.toFixed(2)}</text>`);
    const r = minRecall + ((1 - minRecall) * i) / 4;
    out.push(`<text x="${PAD.left - 8}" y="${y(r) + 4}" text-anchor="end">${(100 * r).toFixed(0)}%</text>`);
    out.push(`<line x1="${PAD.left}" y1="${y(r)}" x2="${W - PAD.right}" y2="${y(r)}" stroke="#ddd"/>`);
  }
  for (const p of points) {
    const cx = x(p.cost);
    const cy = y(p.recall);
    out.push(`<circle cx="${cx}" cy="${cy}" r="${p.ours ? 7 : 5}" fill="${p.ours ? '#d62728' : '#1f77b4'}"/>`);
    out.push(`<text x="${cx + 9}" y="${cy - 6}">${escape(`${p.name} ($${p.cost.toFixed(2)}, ${(100 * p.recall).toFixed(1)}%)`)}</text>`);
  }
  out.push('</svg>');
  return out.join('\n');
}
