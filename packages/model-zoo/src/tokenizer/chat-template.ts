import { Template } from '@huggingface/jinja';
import { UserError } from '@fastkernels/core';

/** One chat message as a template sees it (OpenAI's content parts are joined into text before this). */
export interface ChatMessage {
  readonly role: string;
  readonly content: string;
  readonly name?: string;
}

/** A model's chat_template (Jinja, rendered by @huggingface/jinja with the variables transformers passes). */
export class ChatTemplate {
  private readonly template: Template;

  constructor(
    readonly source: string,
    private readonly specials: { readonly bosToken: string; readonly eosToken: string },
  ) {
    try {
      this.template = new Template(source);
    } catch (e) {
      throw new UserError(`the chat template does not parse: ${(e as Error).message}`);
    }
  }

  render(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
    try {
      return this.template.render({
        messages,
        add_generation_prompt: addGenerationPrompt,
        bos_token: this.specials.bosToken,
        eos_token: this.specials.eosToken,
      });
    } catch (e) {
      // templates call raise_exception('...') to reject a conversation (roles out of order, say): a client error too
      throw new UserError(`the chat template rejected the messages: ${(e as Error).message}`);
    }
  }
}
