import { definePrompt } from '@standardagents/spec';

export default definePrompt({
  name: 'undefined_name',
  toolDescription: 'd',
  model: MODEL,
  prompt: 'p',
});
