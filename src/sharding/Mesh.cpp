#include "heddle/sharding/Mesh.h"

#include "heddle/support/Hash.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

constexpr int64_t kMaxDevices = int64_t{1} << 24;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t b = 0;
  while (true) {
    size_t e = s.find(sep, b);
    parts.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) return parts;
    b = e + 1;
  }
}

bool valid_axis_name(std::string_view n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

Mesh::Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  for (size_t i = 0; i < axes_.size(); ++i) {
    HEDDLE_ASSERT(!axes_[i].name.empty() && axes_[i].size >= 1) << "bad mesh axis " << i;
    for (size_t j = 0; j < i; ++j)
      HEDDLE_ASSERT(axes_[j].name != axes_[i].name) << "duplicate mesh axis " << axes_[i].name;
  }
}

Result<Mesh> Mesh::parse(std::string_view text) {
  std::string t(text);
  if (t.empty()) return Diagnostic("empty mesh shape; use e.g. '4', '2x2' or 'dp=2,tp=2'");
  std::vector<MeshAxis> axes;
  bool named = t.find('=') != std::string::npos;
  auto parts = split(t, named ? ',' : 'x');
  const char* default_names[] = {"x", "y", "z", "w"};
  if (!named && parts.size() > 4)
    return Diagnostic("mesh shape '" + t + "' has more than 4 axes; name them: 'a=2,b=2,...'");
  int64_t devices = 1;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view p = parts[i], size_text = p;
    std::string name = parts.size() == 1 && !named ? "x" : default_names[std::min<size_t>(i, 3)];
    if (named) {
      size_t eq = p.find('=');
      if (eq == std::string_view::npos)
        return Diagnostic("mesh axis '" + std::string(p) + "' in '" + t +
                          "' needs the form name=size");
      name = std::string(p.substr(0, eq));
      size_text = p.substr(eq + 1);
      if (!valid_axis_name(name))
        return Diagnostic("mesh axis name '" + name + "' in '" + t +
                          "' must be an identifier (letters, digits, _)");
    }
    auto size = parse_int(size_text);
    if (!size || *size < 1)
      return Diagnostic("mesh axis size '" + std::string(size_text) + "' in '" + t +
                        "' must be a positive integer");
    for (const auto& a : axes)
      if (a.name == name)
        return Diagnostic("mesh axis '" + name + "' appears twice in '" + t + "'");
    devices *= *size;
    if (devices > kMaxDevices)
      return Diagnostic("mesh '" + t + "' has more than " + std::to_string(kMaxDevices) +
                        " devices");
    axes.push_back({name, *size});
  }
  return Mesh(std::move(axes));
}

const MeshAxis& Mesh::axis(int64_t a) const {
  HEDDLE_ASSERT(a >= 0 && a < rank()) << "mesh axis " << a << " of " << to_string();
  return axes_[static_cast<size_t>(a)];
}

int64_t Mesh::find(std::string_view name) const {
  for (int64_t a = 0; a < rank(); ++a)
    if (axes_[a].name == name) return a;
  return -1;
}

int64_t Mesh::num_devices() const {
  int64_t n = 1;
  for (const auto& a : axes_) n *= a.size;
  return n;
}

IVec Mesh::coords(int64_t device) const {
  HEDDLE_ASSERT(device >= 0 && device < num_devices()) << "device " << device;
  std::vector<int64_t> c(axes_.size());
  for (int64_t a = rank() - 1; a >= 0; --a) {
    c[a] = device % axes_[a].size;
    device /= axes_[a].size;
  }
  return IVec(std::move(c));
}

int64_t Mesh::device(const IVec& coords) const {
  HEDDLE_ASSERT(coords.size() == rank()) << "coords " << coords.to_string();
  int64_t d = 0;
  for (int64_t a = 0; a < rank(); ++a) {
    HEDDLE_ASSERT(coords[a] >= 0 && coords[a] < axes_[a].size) << coords.to_string();
    d = d * axes_[a].size + coords[a];
  }
  return d;
}

std::vector<int64_t> Mesh::group(int64_t a, int64_t dev) const {
  IVec c = coords(dev);
  std::vector<int64_t> g;
  for (int64_t k = 0; k < size(a); ++k) g.push_back(device(c.with(a, k)));
  return g;
}

std::string Mesh::to_string() const {
  if (axes_.empty()) return "1";
  std::vector<std::string> parts;
  for (const auto& a : axes_) parts.push_back(a.name + "=" + std::to_string(a.size));
  return join(parts, ",");
}

size_t Mesh::hash() const {
  size_t h = axes_.size();
  for (const auto& a : axes_) {
    hash_combine(h, a.name);
    hash_combine(h, a.size);
  }
  return h;
}

}  // namespace heddle
