/**
 * Which of many strings occur in a text, in one pass over the text (Aho–Corasick): the memory
 * measures search thousands of facts in every distinct message, where a loop of `includes`
 * would cost messages × facts × text.
 */
export class FactIndex {
  /** Per node: transitions by UTF-16 code unit. */
  private readonly next: Array<Map<number, number>> = [new Map()];
  private readonly fail: number[] = [0];
  /** Per node: the ids of the patterns ending here (own and through failure links). */
  private readonly out: number[][] = [[]];

  constructor(patterns: readonly string[]) {
    patterns.forEach((p, id) => {
      if (p === '') return;
      let node = 0;
      for (let i = 0; i < p.length; i++) {
        const c = p.charCodeAt(i);
        let n = this.next[node]!.get(c);
        if (n === undefined) {
          n = this.next.length;
          this.next.push(new Map());
          this.fail.push(0);
          this.out.push([]);
          this.next[node]!.set(c, n);
        }
        node = n;
      }
      this.out[node]!.push(id);
    });
    // Breadth first: a node's failure link is the longest proper suffix that is also a prefix.
    const queue: number[] = [];
    for (const n of this.next[0]!.values()) queue.push(n);
    for (let q = 0; q < queue.length; q++) {
      const node = queue[q]!;
      for (const [c, child] of this.next[node]!) {
        let f = this.fail[node]!;
        while (f !== 0 && !this.next[f]!.has(c)) f = this.fail[f]!;
        const target = this.next[f]!.get(c);
        this.fail[child] = target !== undefined && target !== child ? target : 0;
        const inherited = this.out[this.fail[child]]!;
        if (inherited.length > 0) this.out[child] = [...this.out[child]!, ...inherited];
        queue.push(child);
      }
    }
  }

  /** The ids of the patterns that occur in `text`. */
  find(text: string): Set<number> {
    const found = new Set<number>();
    let node = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      while (node !== 0 && !this.next[node]!.has(c)) node = this.fail[node]!;
      node = this.next[node]!.get(c) ?? 0;
      const ids = this.out[node]!;
      for (let k = 0; k < ids.length; k++) found.add(ids[k]!);
    }
    return found;
  }
}
