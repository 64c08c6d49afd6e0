// Runs the demo goal on a droidmesh gateway over gRPC and follows its events to the end.
// The .proto files are loaded at run time (@grpc/proto-loader): no generated code.
// Usage: node run_task.js [HOST:PORT]   (else $DROIDMESH_GATEWAY, else 127.0.0.1:50050)
// $DROIDMESH_DEVICE, if set, is the serial of the phone to use (else any free one).
// Exits 0 when the task succeeded, 1 when it failed, 2 when a call failed.
'use strict';

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const GOAL = 'Open Settings and turn on Wi-Fi';
const PROTOS = path.join(__dirname, '..', '..', 'protos');

const definition = protoLoader.loadSync('droidmesh/v1/gateway.proto', {
  includeDirs: [PROTOS],
  keepCase: true, // field names as in the .proto: task_id, step_started, ...
  longs: String, // uint64 seq as a string, exact
  enums: String,
  defaults: true,
  oneofs: true, // event.kind names the field of the oneof that is set
});
const { Gateway } = grpc.loadPackageDefinition(definition).droidmesh.v1;

const target = process.argv[2] || process.env.DROIDMESH_GATEWAY || '127.0.0.1:50050';
const gateway = new Gateway(target, grpc.credentials.createInsecure());
const deadline = (seconds) => new Date(Date.now() + seconds * 1000);

function fail(what, err) {
  console.error(`error: ${what}: ${err.code !== undefined ? grpc.status[err.code] : ''} ${err.details || err.message}`);
  gateway.close();
  process.exit(2);
}

const device = process.env.DROIDMESH_DEVICE || '';

gateway.SubmitTask({ goal: GOAL, device }, { deadline: deadline(10) }, (err, submitted) => {
  if (err) return fail('SubmitTask', err);
  const taskId = submitted.task_id;
  console.log(`task ${taskId}`);
  let completed = null;
  // Past events first, then live ones, each once; the stream ends after `completed`.
  const events = gateway.WatchTask({ task_id: taskId }, { deadline: deadline(300) });
  events.on('data', (event) => {
    console.log(`${event.seq} ${event.kind}`);
    if (event.kind === 'completed') completed = event.completed;
  });
  events.on('error', (e) => fail('WatchTask', e));
  events.on('end', () => {
    gateway.close();
    if (!completed) {
      console.error('error: the event stream ended before the task completed');
      process.exit(2);
    }
    if (!completed.success) {
      console.error(`failed: ${completed.error || completed.answer}`);
      process.exit(1);
    }
    console.log(`answer: ${completed.answer}`);
  });
});
