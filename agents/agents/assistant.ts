// The everyday user-facing assistant (seed §9.1): a person on side B, a model on side A.
import { defineAgent } from '@standardagents/spec';

export default defineAgent({
  name: 'assistant',
  description: `A general assistant that answers the person it talks to.`,
  sideA: { prompt: 'assistant' },
  sideB: { human: true },
});
