// chat.turn: answers one user message (core/chat/turn.ts). Jobs of one
// session share a Graphile queue, so turns run in order.
import { TurnInput, runChatTurn } from '../../core/chat/turn.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { defineTask } from '../define-task.ts';

export default defineTask('chat.turn', TurnInput, async (input, ctx) => runChatTurn(input, { ...ctx, keyring: Keyring.fromConfig(ctx.config) }));
