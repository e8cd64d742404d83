import { defineModel } from '@standardagents/spec';
import { openai } from '@standardagents/openai';

// The factory itself: duet's built-in `openai` provider.
export default defineModel({
  name: 'plain',
  provider: openai,
  model: 'gpt-4o-mini',
});
