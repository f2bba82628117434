/** The charts the visualizer exports, in the order the viewer shows them. */
import type { AnyStateMachine } from 'xstate';
import { backgroundMachine } from '../src/machines/background';
import { compactionMachine } from '../src/machines/compaction';
import { fitMachine } from '../src/machines/fit';
import { gateMachine } from '../src/machines/gate';
import { manualMachine } from '../src/machines/manual';
import { overflowMachine } from '../src/machines/overflow';
import { pressureMachine } from '../src/machines/pressure';
import { transactionMachine } from '../src/machines/transaction';

export interface ChartEntry {
  /** File stem in visualizer/out/ and the machine's id. */
  name: string;
  machine: AnyStateMachine;
  /** Where the chart is defined, relative to the repository root. */
  source: string;
}

export const charts: ChartEntry[] = [
  { name: 'engine', machine: compactionMachine, source: 'src/machines/compaction.ts' },
  { name: 'pressure', machine: pressureMachine, source: 'src/machines/pressure.ts' },
  { name: 'overflow', machine: overflowMachine, source: 'src/machines/overflow.ts' },
  { name: 'manual', machine: manualMachine, source: 'src/machines/manual.ts' },
  { name: 'fit', machine: fitMachine, source: 'src/machines/fit.ts' },
  { name: 'transaction', machine: transactionMachine, source: 'src/machines/transaction.ts' },
  { name: 'gate', machine: gateMachine, source: 'src/machines/gate.ts' },
  { name: 'background', machine: backgroundMachine, source: 'src/machines/background.ts' },
];

export interface StateNodeInfo {
  /** The state node id, e.g. `engine.work.idle` (what transitions and Mermaid ids refer to). */
  id: string;
  /** Its path of keys from the root, e.g. `work.idle` (what a state value spells); '' for the root. */
  path: string;
}

/** Every state node of a machine, root first, in document order. */
export function stateNodes(machine: AnyStateMachine): StateNodeInfo[] {
  const out: StateNodeInfo[] = [];
  const walk = (node: { id: string; path: string[]; states: Record<string, unknown> }) => {
    out.push({ id: node.id, path: node.path.join('.') });
    for (const child of Object.values(node.states)) walk(child as typeof node);
  };
  walk(machine.root);
  return out;
}

export function stateNodeIds(machine: AnyStateMachine): string[] {
  return stateNodes(machine).map((n) => n.id);
}
