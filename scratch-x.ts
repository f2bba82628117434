import { importPiFile, Session } from './src/session/index';
import { evaluateWindow, stitched } from './src/eval/index';
const s = Session.inMemory('x');
await importPiFile(s, './test/fixtures/pi-large-session.jsonl');
const config = JSON.parse(process.argv[2] ?? '{}');
const copies = Number(process.argv[3] ?? 1);
const src = copies === 1 ? s : stitched(s, copies);
for (const w of [32768, 131072]) {
  const t0 = Date.now();
  const r = await evaluateWindow(src, w, { config, peers: [] });
  const x = r.runs[0]!;
  const m = x.memory;
  console.log(w, `comp ${x.compactions} prunes ${x.prunes} cost $${x.ledger.cost.toFixed(2)} needed ${(100*m.neededRecall).toFixed(1)} after ${m.recallAfterCompaction===undefined?'-':(100*m.recallAfterCompaction).toFixed(1)} (${m.compactionsMeasured}) intent ${(100*m.intentRecall).toFixed(1)} peak ${(x.ledger.peak/w).toFixed(2)} over ${x.ledger.overWindow} unpaired ${x.unpairedRequests} ${Date.now()-t0}ms`);
}
