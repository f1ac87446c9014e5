#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "status.h"

namespace testbed {
namespace {

const char* OpName(Op op) {
  switch (op) {
    case Op::kMatMul: return "MatMul";
    case Op::kAdd: return "Add";
    case Op::kMul: return "Mul";
    case Op::kRelu: return "Relu";
    case Op::kGemm: return "Gemm";
  }
  return "?";
}

bool ParseOp(const std::string& op_type, Op& op) {
  if (op_type == "MatMul") op = Op::kMatMul;
  else if (op_type == "Add") op = Op::kAdd;
  else if (op_type == "Mul") op = Op::kMul;
  else if (op_type == "Relu") op = Op::kRelu;
  else if (op_type == "Gemm") op = Op::kGemm;
  else return false;
  return true;
}

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// numpy broadcasting of two shapes; false when they are incompatible.
bool Broadcast(const Shape& a, const Shape& b, Shape& out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// numpy matmul shape rule, with 1-D operands promoted and their unit dimension dropped again.
bool MatMulShape(const Shape& a_in, const Shape& b_in, Shape& out) {
  if (a_in.empty() || b_in.empty()) return false;
  Shape a = a_in.size() == 1 ? Shape{1, a_in[0]} : a_in;
  Shape b = b_in.size() == 1 ? Shape{b_in[0], 1} : b_in;
  if (a[a.size() - 1] != b[b.size() - 2]) return false;
  Shape batch;
  if (!Broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), batch)) return false;
  out = batch;
  if (a_in.size() != 1) out.push_back(a[a.size() - 2]);
  if (b_in.size() != 1) out.push_back(b[b.size() - 1]);
  return true;
}

// Gemm: 2-D A and B (each optionally transposed), C broadcastable to the [M, N] result.
bool GemmShape(const ProgramNode& n, const Shape& a, const Shape& b, const Shape* c, Shape& out) {
  if (a.size() != 2 || b.size() != 2) return false;
  const int64_t m = n.trans_a ? a[1] : a[0], k = n.trans_a ? a[0] : a[1];
  const int64_t kb = n.trans_b ? b[1] : b[0], cols = n.trans_b ? b[0] : b[1];
  if (k != kb) return false;
  out = {m, cols};
  Shape broadcast;
  return c == nullptr || (Broadcast(*c, out, broadcast) && broadcast == out);
}

// Row-major strides of `shape` aligned to an output of rank `rank`, with 0 on broadcast axes.
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    size_t axis = i + (out.size() - shape.size());
    strides[axis] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

HostTensor Binary(Op op, const HostTensor& a, const HostTensor& b, const Shape& out_shape) {
  HostTensor out{out_shape, std::vector<float>(static_cast<size_t>(ElementCount(out_shape)))};
  std::vector<int64_t> sa = BroadcastStrides(a.shape, out_shape);
  std::vector<int64_t> sb = BroadcastStrides(b.shape, out_shape);
  std::vector<int64_t> index(out_shape.size(), 0);
  for (size_t flat = 0; flat < out.data.size(); ++flat) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      ia += index[d] * sa[d];
      ib += index[d] * sb[d];
    }
    out.data[flat] = op == Op::kAdd ? a.data[ia] + b.data[ib] : a.data[ia] * b.data[ib];
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < out_shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

HostTensor MatMul(const HostTensor& a_in, const HostTensor& b_in, const Shape& out_shape) {
  Shape a = a_in.shape.size() == 1 ? Shape{1, a_in.shape[0]} : a_in.shape;
  Shape b = b_in.shape.size() == 1 ? Shape{b_in.shape[0], 1} : b_in.shape;
  const int64_t m = a[a.size() - 2], k = a[a.size() - 1], n = b[b.size() - 1];
  Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2), batch;
  Broadcast(a_batch, b_batch, batch);
  std::vector<int64_t> sa = BroadcastStrides(a_batch, batch), sb = BroadcastStrides(b_batch, batch);
  HostTensor out{out_shape, std::vector<float>(static_cast<size_t>(ElementCount(out_shape)), 0.0f)};
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t flat = 0; flat < ElementCount(batch); ++flat) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      ia += index[d] * sa[d];
      ib += index[d] * sb[d];
    }
    const float* pa = a_in.data.data() + ia * m * k;
    const float* pb = b_in.data.data() + ib * k * n;
    float* po = out.data.data() + flat * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) po[i * n + j] += pa[i * k + p] * pb[p * n + j];
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

HostTensor Gemm(const ProgramNode& n, const HostTensor& a, const HostTensor& b, const HostTensor* c,
               const Shape& out_shape) {
  const int64_t m = out_shape[0], cols = out_shape[1], k = n.trans_a ? a.shape[0] : a.shape[1];
  HostTensor out{out_shape, std::vector<float>(static_cast<size_t>(m * cols), 0.0f)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const float av = n.trans_a ? a.data[p * m + i] : a.data[i * k + p];
      for (int64_t j = 0; j < cols; ++j) {
        out.data[i * cols + j] += av * (n.trans_b ? b.data[j * k + p] : b.data[p * cols + j]);
      }
    }
  for (float& x : out.data) x *= n.alpha;
  if (c != nullptr) {
    const std::vector<int64_t> sc = BroadcastStrides(c->shape, out_shape);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < cols; ++j) out.data[i * cols + j] += n.beta * c->data[i * sc[0] + j * sc[1]];
  }
  return out;
}

OrtStatus* ReadGemmAttributes(const OrtNode* node, ProgramNode& pn) {
  const char* names[] = {"alpha", "beta", "transA", "transB"};
  for (const char* name : names) {
    const OrtOpAttr* attr = nullptr;
    RETURN_IF_ERROR(Api().Node_GetAttributeByName(node, name, &attr));
    if (attr == nullptr) continue;  // unset: keep the ONNX default
    size_t size = 0;
    if (name[0] == 'a' || name[0] == 'b') {
      float value = 0;
      RETURN_IF_ERROR(Api().ReadOpAttr(attr, ORT_OP_ATTR_FLOAT, &value, sizeof(value), &size));
      (name[0] == 'a' ? pn.alpha : pn.beta) = value;
    } else {
      int64_t value = 0;
      RETURN_IF_ERROR(Api().ReadOpAttr(attr, ORT_OP_ATTR_INT, &value, sizeof(value), &size));
      (name[5] == 'A' ? pn.trans_a : pn.trans_b) = value != 0;
    }
  }
  return nullptr;
}

OrtStatus* ValueName(const OrtValueInfo* info, std::string& name) {
  name.clear();
  if (info == nullptr) return nullptr;
  const char* raw = nullptr;
  RETURN_IF_ERROR(Api().GetValueInfoName(info, &raw));
  name = raw == nullptr ? "" : raw;
  return nullptr;
}

OrtStatus* NodeValues(const OrtNode* node, bool inputs, std::vector<std::string>& names) {
  size_t count = 0;
  RETURN_IF_ERROR(inputs ? Api().Node_GetNumInputs(node, &count) : Api().Node_GetNumOutputs(node, &count));
  std::vector<const OrtValueInfo*> infos(count);
  if (count > 0) {
    RETURN_IF_ERROR(inputs ? Api().Node_GetInputs(node, infos.data(), count)
                           : Api().Node_GetOutputs(node, infos.data(), count));
  }
  names.resize(count);
  for (size_t i = 0; i < count; ++i) RETURN_IF_ERROR(ValueName(infos[i], names[i]));
  return nullptr;
}

OrtStatus* CopyConstant(const OrtValue* value, HostTensor& out) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  RETURN_IF_ERROR(Api().GetTensorTypeAndShape(value, &info));
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  OrtStatus* status = Api().GetTensorElementType(info, &type);
  if (status == nullptr) status = Api().GetDimensionsCount(info, &rank);
  out.shape.assign(rank, 0);
  if (status == nullptr && rank > 0) status = Api().GetDimensions(info, out.shape.data(), rank);
  Api().ReleaseTensorTypeAndShapeInfo(info);
  RETURN_IF_ERROR(status);
  RETURN_ERROR_IF(type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, "RacefuzzTestbed supports float32 initializers only.");
  const void* data = nullptr;
  RETURN_IF_ERROR(Api().GetTensorData(value, &data));
  out.data.resize(static_cast<size_t>(ElementCount(out.shape)));
  if (!out.data.empty()) std::memcpy(out.data.data(), data, out.data.size() * sizeof(float));
  return nullptr;
}

}  // namespace

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool IsSupportedOp(const char* domain, const char* op_type) {
  Op op;
  std::string d = domain == nullptr ? "" : domain;
  return (d.empty() || d == "ai.onnx") && op_type != nullptr && ParseOp(op_type, op);
}

OrtStatus* BuildProgram(const OrtGraph* graph, const OrtNode* fused_node, Program& out) {
  std::unordered_map<std::string, int> ids;
  auto id_of = [&](const std::string& name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    out.names.push_back(name);
    return ids[name] = static_cast<int>(out.names.size() - 1);
  };

  std::vector<std::string> names;
  RETURN_IF_ERROR(NodeValues(fused_node, /*inputs*/ true, names));
  for (const auto& n : names) out.inputs.push_back(id_of(n));
  RETURN_IF_ERROR(NodeValues(fused_node, /*inputs*/ false, names));
  for (const auto& n : names) out.outputs.push_back(id_of(n));

  // Constant initializers are not fused-node inputs (drop_constant_initializers): keep a copy.
  size_t num_init = 0;
  RETURN_IF_ERROR(Api().Graph_GetNumInitializers(graph, &num_init));
  std::vector<const OrtValueInfo*> inits(num_init);
  if (num_init > 0) RETURN_IF_ERROR(Api().Graph_GetInitializers(graph, inits.data(), num_init));
  for (const OrtValueInfo* info : inits) {
    std::string name;
    RETURN_IF_ERROR(ValueName(info, name));
    int id = id_of(name);
    if (std::find(out.inputs.begin(), out.inputs.end(), id) != out.inputs.end()) continue;
    const OrtValue* value = nullptr;
    RETURN_IF_ERROR(Api().ValueInfo_GetInitializerValue(info, &value));
    RETURN_ERROR_IF(value == nullptr, "RacefuzzTestbed: initializer '" + name + "' has no value.");
    RETURN_IF_ERROR(CopyConstant(value, out.constants[id]));
  }

  size_t num_nodes = 0;
  RETURN_IF_ERROR(Api().Graph_GetNumNodes(graph, &num_nodes));
  std::vector<const OrtNode*> nodes(num_nodes);
  if (num_nodes > 0) RETURN_IF_ERROR(Api().Graph_GetNodes(graph, nodes.data(), num_nodes));
  std::vector<ProgramNode> pending;
  for (const OrtNode* node : nodes) {
    const char* op_type = nullptr;
    RETURN_IF_ERROR(Api().Node_GetOperatorType(node, &op_type));
    ProgramNode pn{};
    RETURN_ERROR_IF(!ParseOp(op_type, pn.op), std::string("RacefuzzTestbed cannot compile op ") + op_type + ".");
    std::vector<std::string> in, outs;
    RETURN_IF_ERROR(NodeValues(node, true, in));
    RETURN_IF_ERROR(NodeValues(node, false, outs));
    while (!in.empty() && in.back().empty()) in.pop_back();  // trailing optional inputs left out
    const bool arity_ok = pn.op == Op::kRelu ? in.size() == 1 : pn.op == Op::kGemm ? in.size() == 2 || in.size() == 3
                                                                                 : in.size() == 2;
    RETURN_ERROR_IF(!arity_ok || outs.size() != 1,
                    std::string("RacefuzzTestbed: unexpected arity for ") + op_type + ".");
    if (pn.op == Op::kGemm) RETURN_IF_ERROR(ReadGemmAttributes(node, pn));
    for (const auto& n : in) pn.inputs.push_back(id_of(n));
    pn.output = id_of(outs[0]);
    pending.push_back(pn);
  }

  // Order by data dependencies rather than trusting the order ORT lists nodes in.
  std::vector<bool> ready(out.names.size(), false);
  for (int id : out.inputs) ready[id] = true;
  for (const auto& c : out.constants) ready[c.first] = true;
  while (!pending.empty()) {
    auto it = std::find_if(pending.begin(), pending.end(), [&](const ProgramNode& n) {
      return std::all_of(n.inputs.begin(), n.inputs.end(), [&](int id) { return ready[id]; });
    });
    RETURN_ERROR_IF(it == pending.end(), "RacefuzzTestbed: the partition has an input it cannot resolve.");
    ready[it->output] = true;
    out.nodes.push_back(*it);
    pending.erase(it);
  }
  for (int id : out.outputs) {
    RETURN_ERROR_IF(!ready[id], "RacefuzzTestbed: output '" + out.names[id] + "' is never produced.");
  }
  return nullptr;
}

OrtStatus* InferShapes(const Program& program, const std::vector<Shape>& input_shapes,
                       std::vector<Shape>& output_shapes) {
  RETURN_ERROR_IF(input_shapes.size() != program.inputs.size(), "RacefuzzTestbed: wrong number of inputs.");
  std::vector<Shape> shapes(program.names.size());
  for (size_t i = 0; i < input_shapes.size(); ++i) shapes[program.inputs[i]] = input_shapes[i];
  for (const auto& c : program.constants) shapes[c.first] = c.second.shape;
  for (const ProgramNode& n : program.nodes) {
    const Shape& a = shapes[n.inputs[0]];
    bool ok = true;
    if (n.op == Op::kRelu) {
      shapes[n.output] = a;
    } else if (n.op == Op::kMatMul) {
      ok = MatMulShape(a, shapes[n.inputs[1]], shapes[n.output]);
    } else if (n.op == Op::kGemm) {
      const Shape* c = n.inputs.size() == 3 ? &shapes[n.inputs[2]] : nullptr;
      ok = GemmShape(n, a, shapes[n.inputs[1]], c, shapes[n.output]);
    } else {
      ok = Broadcast(a, shapes[n.inputs[1]], shapes[n.output]);
    }
    RETURN_ERROR_IF(!ok, std::string("RacefuzzTestbed: ") + OpName(n.op) + " cannot take shapes " + ShapeText(a) +
                             " and " + ShapeText(shapes[n.inputs.back()]) + ".");
  }
  output_shapes.clear();
  for (int id : program.outputs) output_shapes.push_back(shapes[id]);
  return nullptr;
}

void Execute(const Program& program, const std::vector<ConstView>& inputs,
             const std::vector<MutableView>& outputs) {
  std::vector<HostTensor> values(program.names.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    HostTensor& t = values[program.inputs[i]];
    t.shape = inputs[i].shape;
    t.data.assign(inputs[i].data, inputs[i].data + ElementCount(t.shape));
  }
  for (const auto& c : program.constants) values[c.first] = c.second;
  for (const ProgramNode& n : program.nodes) {
    const HostTensor& a = values[n.inputs[0]];
    HostTensor result;
    if (n.op == Op::kRelu) {
      result = a;
      for (float& x : result.data) x = x > 0.0f ? x : 0.0f;
    } else {
      const HostTensor& b = values[n.inputs[1]];
      Shape shape;
      if (n.op == Op::kGemm) {
        const HostTensor* c = n.inputs.size() == 3 ? &values[n.inputs[2]] : nullptr;
        GemmShape(n, a.shape, b.shape, c != nullptr ? &c->shape : nullptr, shape);
        result = Gemm(n, a, b, c, shape);
      } else if (n.op == Op::kMatMul) {
        MatMulShape(a.shape, b.shape, shape);
        result = MatMul(a, b, shape);
      } else {
        Broadcast(a.shape, b.shape, shape);
        result = Binary(n.op, a, b, shape);
      }
    }
    values[n.output] = std::move(result);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const HostTensor& v = values[program.outputs[i]];
    if (!v.data.empty()) std::memcpy(outputs[i].data, v.data.data(), v.data.size() * sizeof(float));
  }
}

}  // namespace testbed
