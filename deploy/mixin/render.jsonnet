// The mixin's files at its defaults:
//   jsonnet -J deploy/mixin -S -m OUT deploy/mixin/render.jsonnet
(import 'render.libsonnet')(import 'mixin.libsonnet')
