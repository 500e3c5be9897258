"""A real .tflite model written with the FlatBuffers schema of the `tflite` package.

TensorFlow (the usual converter) cannot be installed here, so the tests write the model file directly:
x [batch, IN] -> FULLY_CONNECTED (constant weights [OUT, IN] + bias) -> RELU -> y [batch, OUT].
The batch dim is -1 in the shape signature, so the interpreter may resize it as a converted model allows.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import tflite

# The schema's file identifier; the interpreter rejects a buffer without it.
FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
# The model's operator codes; an operator refers to its code by the index in this tuple.
OPCODES = (tflite.BuiltinOperator.FULLY_CONNECTED, tflite.BuiltinOperator.RELU)


def dense_relu_weights(in_features: int = 64, out_features: int = 32,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The constant weights [OUT, IN] and bias [OUT] the model holds, so a test can recompute it in numpy."""
    rng = np.random.default_rng(seed)
    weights = (rng.standard_normal((out_features, in_features)) / np.sqrt(in_features)).astype(np.float32)
    bias = rng.standard_normal(out_features).astype(np.float32) * np.float32(0.1)
    return weights, bias


def _int_vector(builder: flatbuffers.Builder, values: list[int]) -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype=np.int32))


def _buffer(builder: flatbuffers.Builder, payload: bytes) -> int:
    """A Buffer table; constant data is 16-byte aligned, as the schema's force_align asks."""
    data = None
    if payload:
        builder.StartVector(1, len(payload), 16)
        builder.head -= len(payload)
        builder.Bytes[builder.head:builder.head + len(payload)] = payload
        data = builder.EndVector()
    tflite.BufferStart(builder)
    if data is not None:
        tflite.BufferAddData(builder, data)
    return tflite.BufferEnd(builder)


def _tensor(builder: flatbuffers.Builder, name: str, shape: list[int], buffer: int,
            signature: list[int] | None = None) -> int:
    name_offset = builder.CreateString(name)
    shape_offset = _int_vector(builder, shape)
    signature_offset = _int_vector(builder, signature) if signature is not None else None
    tflite.TensorStart(builder)
    tflite.TensorAddShape(builder, shape_offset)
    if signature_offset is not None:
        tflite.TensorAddShapeSignature(builder, signature_offset)
    tflite.TensorAddType(builder, tflite.TensorType.FLOAT32)
    tflite.TensorAddBuffer(builder, buffer)
    tflite.TensorAddName(builder, name_offset)
    return tflite.TensorEnd(builder)


def _operator_code(builder: flatbuffers.Builder, code: int) -> int:
    tflite.OperatorCodeStart(builder)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(builder, code)  # read by older runtimes
    tflite.OperatorCodeAddBuiltinCode(builder, code)
    tflite.OperatorCodeAddVersion(builder, 1)
    return tflite.OperatorCodeEnd(builder)


def _operator(builder: flatbuffers.Builder, opcode_index: int, inputs: list[int], outputs: list[int],
              options: tuple[int, int] | None = None) -> int:
    inputs_offset, outputs_offset = _int_vector(builder, inputs), _int_vector(builder, outputs)
    tflite.OperatorStart(builder)
    tflite.OperatorAddOpcodeIndex(builder, opcode_index)
    tflite.OperatorAddInputs(builder, inputs_offset)
    tflite.OperatorAddOutputs(builder, outputs_offset)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(builder, options[0])
        tflite.OperatorAddBuiltinOptions(builder, options[1])
    return tflite.OperatorEnd(builder)


def _vector_of_tables(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def make_tflite_model(path: Path, in_features: int = 64, out_features: int = 32, seed: int = 0) -> Path:
    """Write relu(x @ W.T + b) as a .tflite file at PATH, with W, b from dense_relu_weights(...)."""
    weights, bias = dense_relu_weights(in_features, out_features, seed)
    builder = flatbuffers.Builder(1024)
    # Buffer 0 is the schema's empty sentinel; tensors without constant data point at it.
    buffers = [_buffer(builder, b""), _buffer(builder, weights.tobytes()), _buffer(builder, bias.tobytes())]
    tensors = [
        _tensor(builder, "x", [1, in_features], 0, signature=[-1, in_features]),
        _tensor(builder, "dense/weights", [out_features, in_features], 1),
        _tensor(builder, "dense/bias", [out_features], 2),
        _tensor(builder, "dense", [1, out_features], 0, signature=[-1, out_features]),
        _tensor(builder, "y", [1, out_features], 0, signature=[-1, out_features]),
    ]
    tflite.FullyConnectedOptionsStart(builder)
    fc_options = tflite.FullyConnectedOptionsEnd(builder)
    operators = [
        _operator(builder, OPCODES.index(tflite.BuiltinOperator.FULLY_CONNECTED), [0, 1, 2], [3],
                  (tflite.BuiltinOptions.FullyConnectedOptions, fc_options)),
        _operator(builder, OPCODES.index(tflite.BuiltinOperator.RELU), [3], [4]),
    ]
    inputs, outputs = _int_vector(builder, [0]), _int_vector(builder, [4])
    tensors_offset, operators_offset = _vector_of_tables(builder, tensors), _vector_of_tables(builder, operators)
    subgraph_name = builder.CreateString("main")
    tflite.SubGraphStart(builder)
    tflite.SubGraphAddTensors(builder, tensors_offset)
    tflite.SubGraphAddInputs(builder, inputs)
    tflite.SubGraphAddOutputs(builder, outputs)
    tflite.SubGraphAddOperators(builder, operators_offset)
    tflite.SubGraphAddName(builder, subgraph_name)
    subgraph = tflite.SubGraphEnd(builder)

    codes_offset = _vector_of_tables(builder, [_operator_code(builder, code) for code in OPCODES])
    subgraphs_offset = _vector_of_tables(builder, [subgraph])
    buffers_offset = _vector_of_tables(builder, buffers)
    description = builder.CreateString("harness test model: dense + relu")
    tflite.ModelStart(builder)
    tflite.ModelAddVersion(builder, SCHEMA_VERSION)
    tflite.ModelAddOperatorCodes(builder, codes_offset)
    tflite.ModelAddSubgraphs(builder, subgraphs_offset)
    tflite.ModelAddDescription(builder, description)
    tflite.ModelAddBuffers(builder, buffers_offset)
    builder.Finish(tflite.ModelEnd(builder), file_identifier=FILE_IDENTIFIER)
    path.write_bytes(builder.Output())
    return path
