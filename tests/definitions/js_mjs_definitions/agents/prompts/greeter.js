import { definePrompt } from '@standardagents/spec';

const tools = ['greet'];

export default definePrompt({
  name: 'greeter',
  toolDescription: 'Greets.',
  model: 'local',
  prompt: 'You greet people.',
  tools,
});
