// The relay of one attempt for POST /v1/messages: the engine answers in
// Chat Completions and the client reads Anthropic's Messages. The rules of
// a translating relay (relay-translating.ts) hold: nothing goes out before
// the first translated byte (so a failure before it is retried), 502/503
// from an engine move the request on, a stream that breaks after its first
// byte ends with Anthropic's error event, and usage is read from the
// engine's own bytes (the tail) for accounting. What is Anthropic's here is
// the translator and the shape of a whole answer, and message_start held
// for the prompt's count when the relay is given one to wait for.
import { renameErrorParams } from '../../core/param-names.js';
import { MessageStreamTranslator, MESSAGES_PARAMS, toAnthropicError, toMessage, type AnthropicCall } from './index.js';
import type { Outcome, RelayHooks, RelayTarget } from '../../core/relay.js';
import { TranslatingRelay } from '../../core/relay-translating.js';
import { messageJson } from './response.js';

export class AnthropicRelayHandler extends TranslatingRelay {
  constructor(
    target: RelayTarget,
    hooks: RelayHooks,
    resolve: (o: Outcome) => void,
    private readonly call: AnthropicCall,
    /** Names the message when the engine gives no id: the request id. */
    private readonly requestId: string,
    askedUsage: boolean,
    /** The prompt's count, asked of the replica as the attempt starts; null = none is asked (message_start is not held). */
    promptCount: Promise<number | null> | null = null,
  ) {
    super(target, hooks, resolve, new MessageStreamTranslator(call, requestId), askedUsage);
    if (promptCount === null) return;
    const translator = this.translator as MessageStreamTranslator;
    translator.holdForCount();
    void promptCount.then((count) => {
      // Not once this attempt is given up for another (the client never saw it) or the answer is over.
      if (this.over || this.target.clientGone || this.target.res.writableEnded) return;
      this.write(translator.count(count));
    });
  }

  /** The attempt has its outcome: anything written now would land in another attempt's answer. */
  private over = false;

  protected override settle(o: Outcome): void {
    this.over = true;
    super.settle(o);
  }

  /** A whole answer as a Message, or the engine's error in Anthropic's shape with its status. */
  protected whole(body: string, status: number): { status: number; body: string } {
    if (status >= 400) return { status, body: toAnthropicError(renameErrorParams(body, MESSAGES_PARAMS), status) };
    try {
      return {
        status,
        // The engine's tool arguments go out as it wrote them (messageJson), never re-serialised.
        body: messageJson(toMessage(JSON.parse(body) as Parameters<typeof toMessage>[0], this.call, this.requestId)),
      };
    } catch {
      return {
        status: 502,
        body: toAnthropicError(
          '{"error":{"message":"the engine answered with a body that is not a chat completion"}}',
          502,
        ),
      };
    }
  }
}
