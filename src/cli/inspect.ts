/**
 * `xcompact inspect <session.jsonl>`: what a stored session holds and how close its next
 * request is to the model's window. Read-only: the file is read once into memory and
 * replayed there (see ReadOnlyJsonlStore); nothing is written next to it.
 */
import { basename, join } from 'node:path';
import { createCompactionEngine } from '../engine/facade';
import { isCheckpoint, type EventType, type SessionEvent } from '../session/events';
import type { Session } from '../session/session';
import { BudgetError, modelInfoFor, resolveBudget, tokenizerNameFor } from '../services/config';
import { decodeMeterState, isConfigTokenizerName } from '../services/metering';
import { readSnapshot } from '../session/stores/jsonl-snapshot';
import { CliError } from './errors';
import { loadConfig } from './config-file';
import type { TranscriptImportReport } from '../transcripts/common';
import type { TranscriptFormat } from '../transcripts/detect';
import { HARNESS_NAMES, detectFormat, loadSessionReadOnly, openPostgresSession, parseRoute, postgresRef, readInput } from './load';
import { createStyle, fmt, pct, table, useColor, type CliEnv } from './ui';

export interface InspectOptions {
  model?: string;
  contextWindow?: number;
  config?: string;
  json?: boolean;
  color?: boolean;
  /** A PostgreSQL url: `file` is then a session id in it. */
  store?: string;
  /** The environment (NO_COLOR, FORCE_COLOR); default process.env. */
  env?: CliEnv;
}

export interface CheckpointInfo {
  summarySeq: number;
  checkpointSeq: number | undefined;
  trigger: string;
  turn: number | null;
  shadowedNodes: number;
  shadowedTokens: number;
  /** Its price now, when it is still on the surface. */
  checkpointTokens: number | undefined;
  onSurface: boolean;
  summaryModel: string | undefined;
  cachedShare: number | undefined;
}

export interface InspectReport {
  file: string;
  format: TranscriptFormat;
  configFile: string | undefined;
  events: number;
  eventsByType: Partial<Record<EventType, number>>;
  surface: { nodes: number; replaceGeneration: number; messages: number };
  turns: number;
  steps: number;
  openTurn: number | null;
  openStep: { turn: number; step: number } | null;
  pendingCalls: string[];
  pi:
    | {
        format: 'linear' | 'tree';
        turns: number;
        synthesizedResults: number;
        compactions: number;
        rendered: Record<string, number>;
        notSent: Record<string, number>;
        ignored: Record<string, number>;
      }
    | undefined;
  /** What the import did, for a Claude Code session or a Codex rollout (pi's is `pi`). */
  imported: TranscriptImportReport | undefined;
  route: { provider: string; model: string; source: 'option' | 'last request header' } | undefined;
  pressure: {
    totalTokens: number;
    estimatedTokens: number;
    anchored: boolean;
    /** Provider tokens per priced token for this route (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have), and the samples it rests on. */
    calibration: { ratio: number; samples: number };
    /** The provider's figure was far below our calibrated estimate: the estimate is used. */
    suspectUsage: boolean;
    tokenizer: string;
    /**
     * The tokenizer the session's writer priced with, when the log says (the meter snapshot a
     * JsonlStore writer saves beside it, `<file>.prices`): `server:…` for a tokenize endpoint.
     */
    recordedTokenizer: string | undefined;
    /**
     * Why the anchored figure differs from our own count of the request: what the provider's
     * tokenizer counts beyond ours (the calibrated ratio), and what the provider counted that the
     * log does not hold (a harness's system prompt and tool definitions, history before the file
     * starts). Undefined when the figure is not anchored.
     */
    gap: { tokens: number; tokenizer: number; unrecorded: number; ratio: number } | undefined;
    window: number | undefined;
    /** Where the window comes from: --context-window, the config's or a built-in model entry, or the writer's request header. */
    windowSource: 'option' | 'model entry' | 'request header' | undefined;
    /** The window the writer recorded in the last request header (its `models` entry; Codex's `model_context_window`). */
    recordedWindow: number | undefined;
    threshold: number | undefined;
    retain: number | undefined;
    note: string | undefined;
  };
  checkpoints: CheckpointInfo[];
  failedCompactions: Array<{ endSeq: number; code: string; message: string }>;
  /** Compactions given up on purpose (`cancelled`: a `close()` or a caller's abort), not failures. */
  cancelledCompactions: Array<{ endSeq: number; message: string }>;
  prunes: { count: number; tokensBefore: number; tokensAfter: number; charsBefore: number; charsAfter: number };
  lock: { held: boolean; startSeq?: number; trigger?: string; turn?: number | null; orphan?: boolean; staleOrphans: number[] };
  tokensByRole: Record<'system' | 'user' | 'checkpoint' | 'assistant' | 'tool' | 'tools and template', number>;
  tornTail: { line: number; bytes: number } | undefined;
}

export async function runInspect(file: string, options: InspectOptions, out: NodeJS.WriteStream = process.stdout): Promise<InspectReport> {
  const pg = postgresRef(file, options.store);
  if (pg) {
    // Read-only: no writer lease, so a live session can be inspected while its worker writes.
    const { session, close } = await openPostgresSession(pg, true);
    try {
      const report = buildReport(pg.label, 'xcompact', session, loadConfig(options.config, join(process.cwd(), pg.id)), options);
      out.write(
        options.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderInspect(report, createStyle(useColor(options.color !== false, out, options.env)))}\n`,
      );
      return report;
    } finally {
      await close();
    }
  }
  const bytes = await readInput(file);
  const format = detectFormat(file, bytes);
  if (format === 'messages') {
    throw new CliError(
      `${file} is a .json file: inspect reads session JSONL files (xcompact, pi, Claude Code or Codex); use \`xcompact compact\` for a chat-messages JSON file.`,
      2,
    );
  }
  const { session, pi, imported } = await loadSessionReadOnly(file, bytes, format);
  const config = loadConfig(options.config, file);
  const recordedTokenizer = format === 'xcompact' ? await recordedTokenizerOf(file, bytes, session) : undefined;
  const report = buildReport(file, format, session, config, options, recordedTokenizer);
  if (imported && !pi) report.imported = imported;
  if (pi) {
    report.pi = {
      format: pi.format,
      turns: pi.turns,
      synthesizedResults: pi.synthesizedResults,
      compactions: pi.compactions,
      rendered: pi.rendered,
      notSent: pi.notSent,
      ignored: pi.ignored,
    };
  }
  out.write(
    options.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderInspect(report, createStyle(useColor(options.color !== false, out, options.env)))}\n`,
  );
  return report;
}

/**
 * The tokenizer the session's writer priced with: the meter snapshot a JsonlStore writer saves
 * beside the log (`<file>.prices`, valid only for the bytes it was taken on). Undefined when
 * there is none.
 */
async function recordedTokenizerOf(file: string, bytes: Buffer, session: Session): Promise<string | undefined> {
  const snapshot = await readSnapshot(file, bytes, bytes.length, session.length);
  return snapshot ? decodeMeterState(snapshot.payload, snapshot.events)?.tokenizer : undefined;
}

function buildReport(
  file: string,
  format: TranscriptFormat,
  session: Session,
  config: ReturnType<typeof loadConfig>,
  options: InspectOptions,
  recordedTokenizer?: string,
): InspectReport {
  const header = session.latestHeader;
  const route = options.model
    ? { ...parseRoute(options.model), source: 'option' as const }
    : header
      ? { provider: header.data.provider, model: header.data.model, source: 'last request header' as const }
      : undefined;
  const models = route && options.contextWindow ? { [`${route.provider}/${route.model}`]: { contextWindow: options.contextWindow } } : undefined;
  // The writer's own tokenizer, when it is one this process has and the config names none.
  const configured = route ? tokenizerNameFor(config.parsed, route.provider, route.model) : undefined;
  const own = recordedTokenizer !== undefined && isConfigTokenizerName(recordedTokenizer) && recordedTokenizer !== 'server' ? recordedTokenizer : undefined;
  const chosen =
    own !== undefined &&
    config.parsed.tokenizer === undefined &&
    (route === undefined || modelInfoFor(config.parsed, route.provider, route.model)?.tokenizer === undefined)
      ? own
      : configured;
  const engine = createCompactionEngine({
    session,
    config: config.input,
    ...(models ? { models } : {}),
    ...(chosen ? { tokenizer: chosen } : {}),
  });
  try {
    const m = engine.measure();
    const log = session.events();

    // Pressure against the chosen route's budget.
    let window: number | undefined;
    let windowSource: InspectReport['pressure']['windowSource'];
    let threshold: number | undefined;
    let retain: number | undefined;
    let note: string | undefined;
    if (!route) note = 'no request has been recorded yet, so no model is known: pass --model provider/model';
    else {
      const effective = engine.config;
      const info = modelInfoFor(effective, route.provider, route.model);
      const sameRoute = header && header.data.provider === route.provider && header.data.model === route.model;
      // A window the writer knew (its `models` entry) is in the request header.
      window = info?.contextWindow ?? (sameRoute ? header.data.contextWindow : undefined);
      windowSource =
        options.contextWindow !== undefined
          ? 'option'
          : info?.contextWindow !== undefined
            ? 'model entry'
            : window !== undefined
              ? 'request header'
              : undefined;
      if (window === undefined) {
        note = `window unknown: ${route.provider}/${route.model} is not a built-in model; pass --context-window <tokens> (or --config with models["${route.provider}/${route.model}"])`;
      } else {
        try {
          const b = resolveBudget({
            config: effective,
            provider: route.provider,
            model: route.model,
            contextWindow: window,
            ...(sameRoute && header.data.maxTokens !== undefined ? { requestMaxTokens: header.data.maxTokens } : {}),
            ...(info?.maxOutputTokens !== undefined ? { modelMaxOutputTokens: info.maxOutputTokens } : {}),
          });
          threshold = b.threshold;
          retain = b.retain;
        } catch (err) {
          if (!(err instanceof BudgetError)) throw err;
          note = `no threshold: ${err.message}`;
        }
      }
    }

    const eventsByType: Partial<Record<EventType, number>> = {};
    for (const e of log) eventsByType[e.type] = (eventsByType[e.type] ?? 0) + 1;

    // Checkpoints: each compaction/summary, with the bracket it belongs to.
    const checkpoints: CheckpointInfo[] = [];
    const failedCompactions: InspectReport['failedCompactions'] = [];
    const cancelledCompactions: InspectReport['cancelledCompactions'] = [];
    let openStart: SessionEvent<'compaction/start'> | undefined;
    const prunes = { count: 0, tokensBefore: 0, tokensAfter: 0, charsBefore: 0, charsAfter: 0 };
    for (let i = 0; i < log.length; i++) {
      const e = log[i]!;
      if (e.type === 'compaction/start') openStart = e;
      else if (e.type === 'session/end-seed') openStart = undefined;
      else if (e.type === 'compaction/end') {
        if (e.data.error?.code === 'cancelled') cancelledCompactions.push({ endSeq: e.seq, message: e.data.error.message });
        else if (e.data.error) failedCompactions.push({ endSeq: e.seq, code: e.data.error.code, message: e.data.error.message });
        openStart = undefined;
      } else if (e.type === 'compaction/summary') {
        const next = log[i + 1];
        const checkpointSeq = next && isCheckpoint(next) ? next.seq : undefined;
        const onSurface = checkpointSeq !== undefined && session.surface.has(checkpointSeq);
        const u = e.data.usage;
        checkpoints.push({
          summarySeq: e.seq,
          checkpointSeq,
          trigger: openStart?.data.trigger ?? 'unknown',
          turn: openStart?.data.turn ?? null,
          shadowedNodes: e.data.shadowedSeqs.length,
          shadowedTokens: e.data.shadowedTokens,
          checkpointTokens: onSurface ? m.prices.priceOf(checkpointSeq) : undefined,
          onSurface,
          summaryModel: e.data.model ? `${e.data.provider ? `${e.data.provider}/` : ''}${e.data.model}` : undefined,
          cachedShare: u && u.promptTokens > 0 ? (u.cachedTokens ?? 0) / u.promptTokens : undefined,
        });
      } else if (e.type === 'compaction/prune') {
        prunes.count++;
        prunes.tokensBefore += e.data.tokensBefore;
        prunes.tokensAfter += e.data.tokensAfter;
        prunes.charsBefore += e.data.charsBefore;
        prunes.charsAfter += e.data.charsAfter;
      }
    }

    const tokensByRole: InspectReport['tokensByRole'] = { system: 0, user: 0, checkpoint: 0, assistant: 0, tool: 0, 'tools and template': m.envelopeTokens };
    const s = session.surface;
    for (let p = 0; p < s.length; p++) {
      const e = session.event(s.seqAt(p));
      const price = m.prices.priceAt(p);
      if (e.type === 'system/message') tokensByRole.system += price;
      else if (e.type === 'user/message') tokensByRole[isCheckpoint(e) ? 'checkpoint' : 'user'] += price;
      else if (e.type === 'assistant/message') tokensByRole.assistant += price;
      else tokensByRole.tool += price;
    }

    const lock = session.lock;
    const torn = session.loadReport.tornTail;
    return {
      file,
      format,
      configFile: config.path,
      events: log.length,
      eventsByType,
      surface: { nodes: s.length, replaceGeneration: s.replaceGeneration, messages: session.deriveMessages().length },
      turns: eventsByType['turn/start'] ?? 0,
      steps: eventsByType['step/start'] ?? 0,
      openTurn: session.openTurn,
      openStep: session.openStep,
      pendingCalls: s.pendingCalls(),
      pi: undefined,
      imported: undefined,
      route,
      pressure: {
        totalTokens: m.totalTokens,
        estimatedTokens: m.estimatedTokens,
        anchored: m.anchor !== undefined && !m.suspectUsage,
        calibration: { ratio: m.calibration.ratio, samples: m.calibration.samples },
        suspectUsage: m.suspectUsage,
        tokenizer: m.tokenizer,
        recordedTokenizer,
        gap:
          m.anchor !== undefined && !m.suspectUsage
            ? {
                tokens: m.totalTokens - m.estimatedTokens,
                tokenizer: Math.round((m.calibration.ratio - 1) * m.estimatedTokens),
                unrecorded: m.totalTokens - Math.round(m.calibration.ratio * m.estimatedTokens),
                ratio: m.calibration.ratio,
              }
            : undefined,
        window,
        windowSource,
        recordedWindow: header?.data.contextWindow,
        threshold,
        retain,
        note,
      },
      checkpoints,
      failedCompactions,
      cancelledCompactions,
      prunes,
      lock: lock.held
        ? { held: true, startSeq: lock.startSeq, trigger: lock.trigger, turn: lock.turn, orphan: lock.orphan, staleOrphans: [...lock.staleOrphans] }
        : { held: false, staleOrphans: [...lock.staleOrphans] },
      tokensByRole,
      tornTail: torn ? { line: torn.line, bytes: torn.bytes } : undefined,
    };
  } finally {
    engine.stop();
  }
}

export function renderInspect(r: InspectReport, style = createStyle(false)): string {
  const lines: string[] = [];
  const section = (title: string) => lines.push('', style.bold(title));
  lines.push(
    `${style.bold(basename(r.file))} — ${r.format === 'xcompact' ? 'xcompact session' : `${HARNESS_NAMES[r.format]}, imported in memory`} (${fmt(r.events)} events)${r.configFile ? style.dim(` · config ${r.configFile}`) : ''}`,
  );
  const topTypes = Object.entries(r.eventsByType)
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${fmt(n)} ${t}`)
    .join(', ');
  const state = [
    r.openTurn === null ? 'no open turn' : `turn ${r.openTurn} open`,
    r.openStep ? `step ${r.openStep.step} open` : undefined,
    r.pendingCalls.length ? `${r.pendingCalls.length} tool call(s) without a result` : undefined,
  ]
    .filter(Boolean)
    .join(', ');
  lines.push(
    table([
      ['events', topTypes || '(none)'],
      ['surface', `${fmt(r.surface.nodes)} nodes → ${fmt(r.surface.messages)} messages, ${r.surface.replaceGeneration} replacements`],
      ['turns / steps', `${r.turns} turns, ${r.steps} steps; ${state}`],
      ...(r.pi
        ? ([
            [
              'pi import',
              `${r.pi.format} format; ${r.pi.turns} turns; ${r.pi.compactions} pi compactions as checkpoints; ${r.pi.synthesizedResults} calls without a recorded result answered with an error result`,
            ],
            ...(Object.keys(r.pi.rendered).length ? [['  sent as user text', counts(r.pi.rendered)]] : []),
            ...(Object.keys(r.pi.notSent).length ? [['  never sent by pi', counts(r.pi.notSent)]] : []),
            ...(Object.keys(r.pi.ignored).length ? [['  ignored (unknown)', counts(r.pi.ignored)]] : []),
          ] as Array<[string, string]>)
        : []),
      ...(r.imported
        ? ([
            [
              'import',
              `${r.imported.turns} turns; ${r.imported.compactions} ${HARNESS_NAMES[r.imported.harness]} compactions as checkpoints` +
                `${r.imported.summariesUnavailable ? ` (${r.imported.summariesUnavailable} without a readable summary)` : ''}; ` +
                `${r.imported.synthesizedResults} calls without a recorded result answered with an error result`,
            ],
            ...(Object.keys(r.imported.rendered).length ? [['  sent as user text', counts(r.imported.rendered)]] : []),
            ...(Object.keys(r.imported.notSent).length ? [['  never sent', counts(r.imported.notSent)]] : []),
            ...(Object.keys(r.imported.ignored).length ? [['  ignored (unknown)', counts(r.imported.ignored)]] : []),
          ] as Array<[string, string]>)
        : []),
    ]),
  );

  section('pressure');
  const p = r.pressure;
  const rows: Array<[string, string]> = [
    ['model', r.route ? `${r.route.provider}/${r.route.model} (${r.route.source === 'option' ? '--model' : 'from the last request header'})` : '(none)'],
    [
      'request tokens',
      `${fmt(p.totalTokens)}${p.anchored ? ` (anchored to provider usage; own estimate ${fmt(p.estimatedTokens)})` : p.suspectUsage ? ` (own calibrated estimate: the provider's figure is suspect, far below it)` : ' (estimated)'} · tokenizer ${p.tokenizer}` +
        (p.recordedTokenizer === undefined
          ? ''
          : p.recordedTokenizer === p.tokenizer
            ? " (the writer's own)"
            : ` (the writer priced with ${p.recordedTokenizer}${p.recordedTokenizer.startsWith('server') ? '; name it in --config models to measure with it' : ''})`),
    ],
    ...(p.gap && Math.abs(p.gap.tokens) >= 1
      ? ([
          [
            'gap',
            `${fmt(p.gap.tokens)} tokens between the two: ${fmt(p.gap.tokenizer)} the provider's tokenizer counts beyond ours (×${p.gap.ratio.toFixed(3)}), ` +
              `${fmt(p.gap.unrecorded)} the provider counted that the log does not hold (${r.format === 'xcompact' ? 'a system prompt or tools sent without recording them' : 'what the harness sends without recording it: its system prompt and tool definitions, reasoning it keeps encrypted, any history before the file starts'})`,
          ],
        ] as Array<[string, string]>)
      : []),
    [
      'calibration',
      p.calibration.samples > 0
        ? `×${p.calibration.ratio.toFixed(3)} provider tokens per ${p.tokenizer} token (fitted to ${p.calibration.samples} recent steps, with the provider's framing per message)`
        : `×1 (no clean step with provider usage yet)`,
    ],
  ];
  if (p.window !== undefined)
    rows.push([
      'window',
      `${fmt(p.window)} tokens (${pct(p.totalTokens, p.window)} used) · from ${p.windowSource === 'option' ? '--context-window' : p.windowSource === 'model entry' ? 'the model entry (config or built-in)' : "the writer's request header"}` +
        (p.recordedWindow !== undefined && p.recordedWindow !== p.window ? `; the writer recorded ${fmt(p.recordedWindow)}` : ''),
    ]);
  else if (p.recordedWindow !== undefined) rows.push(['window', `the writer recorded ${fmt(p.recordedWindow)} for another model`]);
  if (p.threshold !== undefined) {
    const over = p.totalTokens >= p.threshold;
    rows.push([
      'threshold',
      `${fmt(p.threshold)} (${pct(p.totalTokens, p.threshold)} of it${over ? `: ${style.red('at or above — the next afterStep compacts')}` : ''}); retained tail ${fmt(p.retain ?? 0)}`,
    ]);
  }
  if (p.note) rows.push(['note', style.yellow(p.note)]);
  lines.push(table(rows));

  section(
    `checkpoints: ${r.checkpoints.filter((c) => c.onSurface).length} on the surface, ${r.checkpoints.length} written${r.failedCompactions.length ? `, ${r.failedCompactions.length} failed` : ''}${r.cancelledCompactions.length ? `, ${r.cancelledCompactions.length} cancelled` : ''}`,
  );
  if (r.checkpoints.length === 0) lines.push('  (none)');
  for (const c of r.checkpoints) {
    lines.push(
      `  seq ${String(c.checkpointSeq ?? c.summarySeq).padStart(5)}  ${c.trigger.padEnd(8)} ${c.turn === null ? 'between turns' : `turn ${c.turn}`.padEnd(13)}  ` +
        `${String(c.shadowedNodes).padStart(4)} nodes, ${fmt(c.shadowedTokens).padStart(7)} tokens → ${c.onSurface ? `${fmt(c.checkpointTokens ?? 0)} tokens` : style.dim('merged into a later checkpoint')}` +
        `${c.summaryModel ? style.dim(`  by ${c.summaryModel}${c.cachedShare !== undefined ? `, ${Math.round(c.cachedShare * 100)}% cached` : ''}`) : ''}`,
    );
  }
  for (const f of r.failedCompactions) lines.push(`  ${style.red('failed')} at seq ${f.endSeq}: ${f.code}: ${f.message}`);
  for (const c of r.cancelledCompactions) lines.push(`  ${style.dim('cancelled')} at seq ${c.endSeq}: ${c.message}`);

  section('prunes');
  lines.push(
    r.prunes.count === 0
      ? '  (none)'
      : `  ${r.prunes.count} tool results cut: ${fmt(r.prunes.tokensBefore)} → ${fmt(r.prunes.tokensAfter)} tokens (${fmt(r.prunes.charsBefore)} → ${fmt(r.prunes.charsAfter)} characters)`,
  );

  section('locks');
  const l = r.lock;
  if (l.held && l.orphan) {
    lines.push(
      `  ${style.red('orphan')} compaction/start at seq ${l.startSeq} (${l.trigger}, ${l.turn === null ? 'between turns' : `turn ${l.turn}`}): a process stopped mid-compaction. ` +
        'Compactions report busy until it is cleared: call session.recover() right after Session.open (or `xcompact compact --recover`).',
    );
  } else if (l.held) lines.push(`  compaction/start at seq ${l.startSeq} is open (${l.trigger})`);
  else lines.push('  none held');
  if (l.staleOrphans.length) lines.push(`  ${l.staleOrphans.length} earlier orphan(s) cleared by session/end-seed: seq ${l.staleOrphans.join(', ')}`);
  if (r.openTurn !== null || r.pendingCalls.length) {
    lines.push(`  ${style.yellow('mid-turn')}: the log ends inside a turn; if its process is gone, call session.recover() before continuing.`);
  }

  section('tokens by role (current surface)');
  const total = Object.values(r.tokensByRole).reduce((a, b) => a + b, 0);
  lines.push(table(Object.entries(r.tokensByRole).map(([k, v]) => [k, `${fmt(v).padStart(8)}  ${pct(v, total).padStart(4)}`] as [string, string])));

  section('torn tail');
  const imp = r.imported;
  if (imp) {
    // A transcript of another harness: what the shared record walker met (transcripts/records.ts).
    lines.push(
      imp.tornLines > 0
        ? `  ${imp.tornLines} torn last line skipped (a session still being written, or a crash mid-record); the file was not changed`
        : '  none: every line is complete',
    );
    if (imp.mergedLines > 0)
      lines.push(`  ${imp.mergedLines} line${imp.mergedLines === 1 ? '' : 's'} holding two records or more (…}{…), split into their records`);
    for (const w of imp.warnings) lines.push(`  warning: ${w}`);
  } else
    lines.push(
      r.tornTail
        ? `  line ${r.tornTail.line}: ${r.tornTail.bytes} bytes without a final newline (a crash mid-write) were dropped here; the file was not changed. Opening it for writing keeps them aside in <file>.torn-<time>.`
        : '  none: every line is complete',
    );
  return lines.join('\n');
}

function counts(byKind: Record<string, number>): string {
  return Object.entries(byKind)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
}
