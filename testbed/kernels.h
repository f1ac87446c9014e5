// The op interpreter: what both backends "run" on their device.
//
// A compiled partition becomes a Program: float32 MatMul, Add, Mul and Relu nodes (and Gemm, which
// ORT's level-1 MatMulAddFusion makes of MatMul+Add before any EP sees the graph) in topological
// order, with the constant initializers copied in at Compile time (the EP asks ORT to drop them
// from the fused node's inputs). Both backends execute the same Program on host memory they
// manage, so outputs equal the CPU EP's. This module knows nothing about backends, routing or
// ORT sessions; it does not support broadcasting beyond numpy's rules or any other dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "onnxruntime_c_api.h"

namespace testbed {

using Shape = std::vector<int64_t>;

struct HostTensor {
  Shape shape;
  std::vector<float> data;
};

enum class Op { kMatMul, kAdd, kMul, kRelu, kGemm };

struct ProgramNode {
  Op op;
  std::vector<int> inputs;  // value ids
  int output;               // value id
  // Gemm only: Y = alpha * op(A) * op(B) + beta * C.
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

struct Program {
  std::vector<std::string> names;  // value id -> name, for messages
  std::vector<int> inputs;         // value ids in the fused node's input order
  std::vector<int> outputs;        // value ids in the fused node's output order
  std::unordered_map<int, HostTensor> constants;
  std::vector<ProgramNode> nodes;  // topologically sorted
};

// True for the ops the EP claims (the default ONNX domain, float32 only; types checked apart).
bool IsSupportedOp(const char* domain, const char* op_type);

// Builds the Program for one partition ORT asks the EP to compile.
OrtStatus* BuildProgram(const OrtGraph* graph, const OrtNode* fused_node, Program& out);

// Output shapes for these input shapes, or an error naming the op that cannot take them.
OrtStatus* InferShapes(const Program& program, const std::vector<Shape>& input_shapes,
                       std::vector<Shape>& output_shapes);

struct ConstView {
  const float* data;
  Shape shape;
};

struct MutableView {
  float* data;
  Shape shape;
};

// Runs the program; shapes must be those InferShapes accepted.
void Execute(const Program& program, const std::vector<ConstView>& inputs,
             const std::vector<MutableView>& outputs);

int64_t ElementCount(const Shape& shape);

}  // namespace testbed
