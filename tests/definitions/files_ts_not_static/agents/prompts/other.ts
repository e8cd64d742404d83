export default defineThing({ name: 'other' });
