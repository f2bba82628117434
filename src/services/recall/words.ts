/**
 * The inverted word index behind text queries: word → entries holding it. It only narrows the
 * candidates (a superset of the entries that match); every candidate is then checked against
 * the whole query, so the index never decides a match on its own.
 *
 * A word is a maximal run of letters, digits, marks and `_`, lowercased, cut to WORD_MAX code
 * units (a base64 blob is one word, not thousands). In a query, a word bounded by non-word
 * characters on both sides must be a whole word of any text that contains the query; a word at
 * the query's edge may be part of a longer one (a prefix, a suffix, or anything inside).
 */
const WORD = /[\p{L}\p{N}\p{M}_]+/gu;
const WORD_MAX = 48;

function cut(word: string): string {
  return word.length > WORD_MAX ? word.slice(0, WORD_MAX) : word;
}

export function wordsOf(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.toLowerCase().matchAll(WORD)) out.add(cut(m[0]));
  return out;
}

export interface QueryTerm {
  word: string;
  /** Non-word character (not the query's edge) just before it. */
  boundedLeft: boolean;
  boundedRight: boolean;
}

export function termsOf(query: string): QueryTerm[] {
  const lower = query.toLowerCase();
  const out: QueryTerm[] = [];
  for (const m of lower.matchAll(WORD)) {
    const start = m.index;
    const end = start + m[0].length;
    out.push({ word: m[0], boundedLeft: start > 0, boundedRight: end < lower.length });
  }
  return out;
}

export class WordIndex {
  /** word → entry ids, ascending (ids are given in increasing order). */
  private readonly postings = new Map<string, number[]>();

  get vocabulary(): number {
    return this.postings.size;
  }

  add(id: number, text: string): void {
    for (const w of wordsOf(text)) {
      const list = this.postings.get(w);
      if (list === undefined) this.postings.set(w, [id]);
      else if (list[list.length - 1] !== id) list.push(id);
    }
  }

  /**
   * Entry ids that may contain `query`, or undefined when words cannot narrow it (no word in
   * it): the caller then checks every entry.
   */
  candidates(query: string): number[] | undefined {
    const terms = termsOf(query);
    if (terms.length === 0) return undefined;
    const exact = terms.filter((t) => t.boundedLeft && t.boundedRight);
    if (exact.length > 0) {
      const lists = exact.map((t) => this.postings.get(cut(t.word)) ?? []).sort((a, b) => a.length - b.length);
      return lists.slice(1).reduce(intersect, lists[0]!);
    }
    // Only edge words: the longest one narrows best; every vocabulary word that can hold it counts.
    const t = terms.reduce((a, b) => (b.word.length > a.word.length ? b : a));
    const w = cut(t.word);
    if (t.boundedLeft) {
      // A prefix of the text's word: its stored (cut) form starts with the query's cut form.
      return this.collect((v) => v.startsWith(w));
    }
    if (t.word.length >= WORD_MAX) return undefined; // inside a word longer than what is stored: only a scan can tell
    // A suffix, or inside: a stored word that was cut may hold it in the part that was cut off.
    const fits = t.boundedRight ? (v: string) => v.endsWith(w) : (v: string) => v.includes(w);
    return this.collect((v) => v.length === WORD_MAX || fits(v));
  }

  private collect(fits: (word: string) => boolean): number[] {
    const hits = new Set<number>();
    for (const [v, list] of this.postings) if (fits(v)) for (const id of list) hits.add(id);
    return [...hits].sort((a, b) => a - b);
  }
}

function intersect(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i]! < b[j]!) i++;
    else if (a[i]! > b[j]!) j++;
    else {
      out.push(a[i]!);
      i++;
      j++;
    }
  }
  return out;
}
