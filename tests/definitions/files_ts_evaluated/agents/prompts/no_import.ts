export default definePrompt({ name: 'no_import', toolDescription: 'd', model: 'm', prompt: 'p' });
