/**
 * Speed of `xcompact eval` (docs/transcripts-and-eval.md#measured): the real pi transcript (1,019 lines, 914 messages, 453
 * requests: about a 1,000-message session) and the real Claude Code session, each replayed at
 * two windows through xcompact and the five simulated peers, as the command runs it. Reports
 * wall time and the process's CPU time in this one run, and their ratio to the target (one
 * minute on 2 cores for the 1,000-message transcript); CPU time is what a shared machine
 * cannot inflate.
 *
 *   npx tsx bench/eval.ts
 */
import { pathToFileURL } from 'node:url';
import { evaluateWindow } from '../src/eval/index';
import { withoutCompactions } from '../src/eval/lived';
import { importTranscriptFile } from '../src/transcripts/import';
import { Session } from '../src/session/session';
import { findPiData } from '../test/helpers/pi-data';
import { CLAUDE_REAL } from '../test/helpers/transcripts';

const TARGET_SECONDS = 60;
const WINDOWS = [32_768, 131_072];

export async function run(): Promise<void> {
  for (const path of [findPiData().path, CLAUDE_REAL]) {
    const imported = Session.inMemory('bench-eval');
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const report = await importTranscriptFile(imported, path);
    const source = withoutCompactions(imported);
    const messages = source.events().filter((e) => e.surfaceOp === 'append').length;
    let requests = 0;
    for (const w of WINDOWS) {
      const r = await evaluateWindow(source, w);
      requests += r.runs.reduce((n, run) => n + run.records.length, 0);
    }
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    console.log(
      `${path.split('/').pop()} (${report.harness}, ${messages} messages): ${WINDOWS.length} windows × 5 policies = ${requests} replayed requests; ` +
        `wall ${wall.toFixed(1)} s, CPU ${cpuSeconds.toFixed(1)} s; CPU ÷ target (${TARGET_SECONDS} s) = ${(cpuSeconds / TARGET_SECONDS).toFixed(2)}`,
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
