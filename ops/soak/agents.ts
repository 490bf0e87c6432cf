// Agent API mutations with Idempotency-Keys: each agent creates a board, then
// saves new content versions to it, one mutation at a time. Every mutation is
// retried with its key until it is answered; a third are replayed on purpose
// afterwards. The invariants compare what was answered with the rows: one
// board per create key, one version per save key.
import { randomUUID } from 'node:crypto';
import type { Replay } from './chat.ts';
import type { SoakClient } from './client.ts';
import type { SoakAgent } from './seed.ts';

export type Mutation = {
  agent: SoakAgent;
  kind: 'create' | 'save';
  key: string;
  boardId: string;
  status: number;
  version: number;
  /** An attempt ended unsure (its connection died with a killed api, or a 503 while PostgreSQL was away) before the answer. */
  unsure: boolean;
};

export class AgentWorkload {
  readonly mutations: Mutation[] = [];
  readonly replays: Replay[] = [];
  readonly unanswered = new Map<string, number>();
  private boards = new Map<SoakAgent, string>();
  private chains = new Map<SoakAgent, Promise<void>>();

  constructor(private readonly client: SoakClient) {}

  mutate(agent: SoakAgent, random: () => number): void {
    const previous = this.chains.get(agent) ?? Promise.resolve();
    this.chains.set(
      agent,
      previous.then(() => this.mutateNow(agent, random)).catch(() => undefined),
    );
  }

  private async mutateNow(agent: SoakAgent, random: () => number): Promise<void> {
    const key = `soak-agent-${randomUUID()}`;
    const boardId = this.boards.get(agent);
    const [method, route, body] = boardId
      ? ([
          'PUT',
          `/api/agent/v1/boards/${boardId}/content`,
          { content: { widgets: [{ type: 'note', text: key }] } },
        ] as const)
      : ([
          'POST',
          '/api/agent/v1/boards',
          { title: `Soak board ${key.slice(-8)}`, scope_type: 'company', scope_id: agent.companyId },
        ] as const);
    const headers = { authorization: `Bearer ${await agent.token()}`, 'idempotency-key': key };
    let unsure = false;
    const answer = await this.client.until(method, route, {
      headers,
      body,
      deadline: Date.now() + 120_000,
      onUnsure: () => {
        unsure = true;
      },
    });
    if (!answer || answer.status >= 300) {
      const why = answer ? `${answer.status} ${answer.body.slice(0, 120)}` : 'unreachable';
      this.unanswered.set(why, (this.unanswered.get(why) ?? 0) + 1);
      return;
    }
    const { id, latest_version: version } = JSON.parse(answer.body) as { id: string; latest_version: number };
    if (!boardId) this.boards.set(agent, id);
    this.mutations.push({
      agent,
      kind: boardId ? 'save' : 'create',
      key,
      boardId: id,
      status: answer.status,
      version,
      unsure,
    });
    if (random() < 0.33) {
      const again = await this.client.until(method, route, { headers, body, deadline: Date.now() + 120_000 });
      if (again)
        this.replays.push({
          key,
          route: `${method} ${route.replace(/[0-9a-f-]{36}/g, ':id')}`,
          same: again.status === answer.status && again.body === answer.body,
          first: answer.body,
          again: `${again.status} ${again.body}`,
        });
    }
  }

  async settle(): Promise<void> {
    await Promise.all(this.chains.values());
  }
}
