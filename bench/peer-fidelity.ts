/**
 * Peer fidelity: does a simulated peer compact where the real harness did? For every Claude Code
 * session (`compact_boundary` records: the harness's own `preTokens`) and every Codex rollout
 * (`compacted` records: the token_count before them) under ../shared/data and its corpus/, the
 * session is replayed as lived (the harness's compactions undone) through that harness's
 * simulation at the recorded window, and each real compaction is set beside the simulation's:
 * the token level (real `preTokens`, or Codex's last token_count, against the level the
 * simulation compacted at, counted as the harness counts: its last usage plus a rough count of
 * what came since; goal within 5%). The replay counts as the file's provider did (fitted to its
 * usage, src/eval/calibration.ts). A compaction whose history the file does not hold (the
 * session started before the file) is not judged.
 *
 *   npx tsx bench/peer-fidelity.ts [file…]
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { claudeCode, codex, claudeCodeThreshold } from '../src/eval/peers';
import { Pricer } from '../src/eval/pricing';
import { simulate } from '../src/eval/simulate';
import { withoutCompactions } from '../src/eval/lived';
import { importTranscriptFile } from '../src/transcripts/index';
import { Session } from '../src/session/session';
import { isCheckpoint } from '../src/session/events';
import { calibratedPricer, fitReplayCalibration } from '../src/eval/calibration';

/** ../shared/data beside the repository (XCOMPACT_SHARED_DATA names another place). */
const DATA = process.env.XCOMPACT_SHARED_DATA ?? new URL('../../shared/data/', import.meta.url).pathname;
const GOAL = 0.05;

interface RealCompaction {
  tokens: number;
  version?: string;
  trigger?: string;
}

/** The records of a JSONL file, merged lines split, a torn line skipped. */
function records(path: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    for (const piece of line.split(/(?<=\})(?=\{")/)) {
      try {
        out.push(JSON.parse(piece) as Record<string, unknown>);
      } catch {
        /* a torn line */
      }
    }
  }
  return out;
}

function claudeCompactions(recs: Array<Record<string, unknown>>): RealCompaction[] {
  return recs
    .filter((r) => r.subtype === 'compact_boundary')
    .map((r) => {
      const meta = r.compactMetadata as { preTokens?: number; trigger?: string } | undefined;
      return { tokens: meta?.preTokens ?? NaN, version: r.version as string | undefined, trigger: meta?.trigger };
    })
    .filter((c) => Number.isFinite(c.tokens) && c.trigger !== 'manual');
}

function codexCompactions(recs: Array<Record<string, unknown>>): { compactions: RealCompaction[]; window?: number } {
  const compactions: RealCompaction[] = [];
  let last: { total_tokens?: number } | undefined;
  let window: number | undefined;
  for (const r of recs) {
    const p = r.payload as { type?: string; info?: { last_token_usage?: { total_tokens?: number }; model_context_window?: number } } | undefined;
    if (r.type === 'event_msg' && p?.type === 'token_count' && p.info) {
      last = p.info.last_token_usage;
      window = p.info.model_context_window ?? window;
    }
    if (r.type === 'compacted' && last?.total_tokens) compactions.push({ tokens: last.total_tokens });
  }
  return { compactions, window };
}

/** Claude Code's output reserve by version: 32,000 up to 2.1.14 (the boundaries of 2.0.76–2.1.14 sit at 155k of 200k), 20,000 since. */
function claudeReserve(version: string | undefined): number {
  const [maj = 0, min = 0, patch = 0] = (version ?? '9.9.9').split('.').map(Number);
  return maj < 2 || (maj === 2 && (min < 1 || (min === 1 && patch < 20))) ? 32_000 : 20_000;
}

function files(): string[] {
  const args = process.argv.slice(2);
  if (args.length > 0) return args;
  const out: string[] = [];
  for (const dir of [DATA, join(DATA, 'corpus/claude-code'), join(DATA, 'corpus/codex'), join(DATA, 'corpus/claude-code-compaction-call')]) {
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) if (f.endsWith('.jsonl')) out.push(join(dir, f));
  }
  return out;
}

export async function run(): Promise<void> {
  const pricer = new Pricer('o200k_base');
  console.log("peer fidelity: each real compaction beside the simulated harness's (level = request tokens when it compacted; goal |sim − real| ≤ 5% of real)");
  let judged = 0;
  let met = 0;
  for (const path of files()) {
    const recs = records(path);
    const name = path.split('/').pop()!;
    const isCodex = recs.some((r) => r.type === 'session_meta');
    const real = isCodex ? codexCompactions(recs).compactions : claudeCompactions(recs);
    if (real.length === 0) {
      console.log(`  ${name}: no automatic compaction recorded`);
      continue;
    }
    const recorded = Session.inMemory(`fidelity-${name}`);
    try {
      await importTranscriptFile(recorded, path);
    } catch (error) {
      console.log(`  ${name}: not imported (${(error as Error).message})`);
      continue;
    }
    // Replayed as eval replays it: counted as the harness's provider counted (fitted to the
    // file's usage), what the harness sent unrecorded (system prompt, tools) on every request.
    const { calibration } = fitReplayCalibration(recorded, pricer);
    const counted = calibratedPricer(recorded, calibration, pricer);
    // A compaction whose history the file does not hold (the session started before the file):
    // the replay, never compacting, stays short of what the harness sent just before it.
    const recordedSizes: number[] = [];
    const before: number[] = [];
    for (const e of recorded.events()) {
      if (isCheckpoint(e)) before.push(recordedSizes.length - 1);
      if (e.type === 'assistant/message') recordedSizes.push(e.data.usage?.promptTokens ?? 0);
    }
    const livedSizes: number[] = [];
    const keep: typeof claudeCode = { name: 'keep', description: 'never compacts', summaryLedger: 'none', beforeRequest: async () => {} };
    await simulate(withoutCompactions(recorded).events(), keep, counted, { window: Number.MAX_SAFE_INTEGER, maxOutputTokens: 0, summaryCap: 1 }, (_m, c) =>
      livedSizes.push(c.ledger.lastTokens),
    );
    const window = isCodex ? (codexCompactions(recs).window ?? 272_000) : 200_000;
    const reserve = isCodex ? 0 : claudeReserve(real[0]!.version);
    const maxOutputTokens = isCodex ? 0 : 64_000;
    const policy = isCodex
      ? codex
      : {
          ...claudeCode,
          async beforeRequest(s: Parameters<typeof claudeCode.beforeRequest>[0]) {
            if (s.level(s.counts) >= claudeCodeThreshold(s.window, maxOutputTokens, reserve)) await claudeCode.onOverflow!(s);
          },
        };
    const { state } = await simulate(withoutCompactions(recorded).events(), policy, counted, { window, maxOutputTokens, summaryCap: 20_000 });
    const rows = real.map((r, i) => {
      const k = before[i];
      const missing = k === undefined || k < 0 ? 0 : recordedSizes[k]! - livedSizes[k]!;
      if (missing > GOAL * r.tokens)
        return `#${i + 1} real ${r.tokens.toLocaleString('en-US')} · not judged: the file does not hold the history before it (the request before it carried ${missing.toLocaleString('en-US')} tokens more than the file shows)`;
      const sim = state.compactedAt[i];
      const off = sim === undefined ? undefined : Math.abs(sim - r.tokens) / r.tokens;
      judged++;
      if (off !== undefined && off <= GOAL) met++;
      // No compaction: how close the replay came (its largest request against the real level).
      const peak =
        sim === undefined
          ? ` (the replay's largest request ${state.ledger.peak.toLocaleString('en-US')}, ${(((state.ledger.peak - r.tokens) / r.tokens) * 100).toFixed(1)}% of the real level)`
          : '';
      return `#${i + 1} real ${r.tokens.toLocaleString('en-US')}${r.version ? ` (v${r.version})` : ''} · sim ${sim === undefined ? 'none' : sim.toLocaleString('en-US')}${peak} · off ${off === undefined ? '—' : `${(off * 100).toFixed(1)}%`} ${off !== undefined && off <= GOAL ? '✓' : '✗'}`;
    });
    console.log(
      `  ${name} (${isCodex ? 'Codex' : 'Claude Code'}, window ${window.toLocaleString('en-US')}, sim compactions ${state.compactions}): ${rows.join('; ')}`,
    );
  }
  console.log(
    `peer fidelity: ${met} of ${judged} real compactions matched within ${GOAL * 100}% (compactions whose history the file does not hold not judged)`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
