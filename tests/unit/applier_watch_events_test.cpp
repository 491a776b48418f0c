// The `--watch -` decoder: kubectl's watch events (pretty-printed or one a line, split
// anywhere), and malformed events reported and skipped, never a crash.
#include <gtest/gtest.h>

#include "applier/node/watch_events.h"

namespace kpc::applier {
namespace {

const char* kService = R"({
    "type": "ADDED",
    "object": {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "12"},
        "spec": {"clusterIP": "10.96.10.10", "clusterIPs": ["10.96.10.10"],
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 "type": "ClusterIP"}
    }
}
)";
const char* kSlice = R"({"type":"MODIFIED","object":{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-abc","namespace":"shop","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["10.244.1.5"],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}}
)";
const char* kNodeDeleted = R"({"type":"DELETED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}}}
)";

TEST(WatchEvents, DecodesKubectlStreamInAnyChunking) {
  const std::string stream = std::string(kService) + kSlice + kNodeDeleted +
                             R"({"type":"BOOKMARK","object":{"kind":"Service","apiVersion":"v1","metadata":{"resourceVersion":"99"}}})" +
                             R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}})";
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{64}, stream.size()}) {
    WatchStreamDecoder d;
    std::vector<WatchEvent> ev;
    std::vector<std::string> err;
    for (size_t i = 0; i < stream.size(); i += chunk) d.feed(std::string_view(stream).substr(i, chunk), &ev, &err);
    d.finish(&err);
    EXPECT_TRUE(err.empty()) << err.front();
    ASSERT_EQ(ev.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(ev[0].type, WatchEvent::Type::Added);
    EXPECT_EQ(ev[0].kind, WatchEvent::Kind::Service);
    ASSERT_TRUE(ev[0].service.has_value());
    EXPECT_EQ(ev[0].service->meta.name, "web");
    EXPECT_EQ(ev[0].ns, "shop");
    EXPECT_EQ(ev[1].type, WatchEvent::Type::Modified);
    ASSERT_TRUE(ev[1].slice.has_value());
    EXPECT_EQ(ev[1].slice->endpoints.size(), 1u);
    EXPECT_EQ(ev[2].type, WatchEvent::Type::Deleted);
    EXPECT_EQ(ev[2].kind, WatchEvent::Kind::Node);
    EXPECT_EQ(ev[2].name, "node-b");
    EXPECT_EQ(d.skipped(), 2u);  // the bookmark and the Pod
  }
}

TEST(WatchEvents, MalformedEventsAreSkippedAndTheStreamGoesOn) {
  const std::string bad_port = R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"x","namespace":"d"},"spec":{"clusterIP":"10.96.0.5","ports":[{"port":70000}]}}})";
  const std::string stream = std::string("this is not json\n") +                      // garbage line
                             R"({"type":"ADDED","object":{"kind":"Service",}})" + "\n" +  // bad JSON
                             bad_port + "\n" +                                          // invalid object
                             R"({"type":"SIDEWAYS","object":{}})" + "\n" +             // unknown type
                             R"({"type":"DELETED","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"y"}}})" +
                             "\n" +                                                     // no namespace
                             R"({"type":"ERROR","object":{"kind":"Status","message":"too old resource version"}})" +
                             "\n" + R"({"type":"ADDED","object":{"apiVersion":"v2","kind":"Node","metadata":{"name":"n"}}})" +
                             "\n" + kSlice + "{\"type\":\"ADDED\",\"object\":{";  // cut off at the end
  WatchStreamDecoder d;
  std::vector<WatchEvent> ev;
  std::vector<std::string> err;
  d.feed(stream, &ev, &err);
  d.finish(&err);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, WatchEvent::Kind::EndpointSlice);
  ASSERT_EQ(err.size(), 8u);
  EXPECT_NE(err[0].find("expected a JSON object"), std::string::npos) << err[0];
  EXPECT_NE(err[2].find("70000"), std::string::npos) << err[2];
  EXPECT_NE(err[3].find("SIDEWAYS"), std::string::npos) << err[3];
  EXPECT_NE(err[4].find("namespace"), std::string::npos) << err[4];
  EXPECT_NE(err[5].find("too old"), std::string::npos) << err[5];
  EXPECT_NE(err[6].find("apiVersion"), std::string::npos) << err[6];
  EXPECT_NE(err[7].find("ended inside"), std::string::npos) << err[7];
}

TEST(WatchEvents, OversizedEventIsSkipped) {
  WatchStreamDecoder d(160);
  std::vector<WatchEvent> ev;
  std::vector<std::string> err;
  d.feed(std::string("{\"type\":\"ADDED\",\"object\":{\"pad\":\"") + std::string(400, 'x') + "\"}}\n" + kNodeDeleted,
         &ev, &err);
  EXPECT_EQ(ev.size(), 1u);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_NE(err[0].find("larger than"), std::string::npos);
}

}  // namespace
}  // namespace kpc::applier
