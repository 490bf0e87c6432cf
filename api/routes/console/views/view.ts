// What every console page is: a title, the part that updates live (rendered
// again on the server when something it shows changes, and swapped in by the
// console script) and the parts that stay (filters, forms with their CSRF
// tokens, which live updates must not wipe while someone types).
import type { Config } from '../../../../core/config.ts';
import type { DatabasePool } from '../../../../core/db/pool.ts';
import type { Html } from '../../../pages/layout.ts';

export type ViewContext = {
  db: DatabasePool;
  config: Config;
  /** The CSRF token of this operator's forms; null when rendering for a live update (forms are not in the live part). */
  csrf: string | null;
};

export type View = { title: string; top?: Html; live: Html; bottom?: Html };

export type ViewInput = { params: Record<string, string>; query: Record<string, string | undefined> };

/** A page's view: null when what it shows does not exist (404). */
export type ViewFn = (ctx: ViewContext, input: ViewInput) => Promise<View | null>;
