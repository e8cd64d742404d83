import { defineModel, providerEnv } from '@standardagents/spec';
import { anthropic } from '@standardagents/anthropic';

// Called with options: a provider of the model's own.
export default defineModel({
  name: 'own',
  provider: anthropic({
    baseUrl: 'http://127.0.0.1:1/v1',
    apiKey: providerEnv('MY_KEY'),
    timeout: 5000,
  }),
  model: 'claude-sonnet-4-5',
});
