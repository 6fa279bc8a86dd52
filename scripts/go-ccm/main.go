// The Go cloud controller manager as the test environment's peer: Kubernetes 1.20.2's generic controllers
// (k8s.io/cloud-provider/app) with its in-tree AWS provider (k8s.io/legacy-cloud-providers/aws, aws-sdk-go v1),
// built by scripts/build-kubernetes.sh from Debian's kubernetes source package, unchanged.
//
// This file replaces 1.20.2's cmd/cloud-controller-manager/main.go, the "sample" main, which builds its
// configuration before the command line is parsed and initialises a fixed provider name: --cloud-provider and
// --cloud-config were never honoured (kubernetes/cloud-provider#45, fixed upstream after 1.20.2 by parsing the
// flags first). This main does what the fix does: parse the flags, then build the configuration, initialise the
// provider named by --cloud-provider with --cloud-config, and run the four standard controllers.
package main

import (
	"fmt"
	"math/rand"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	_ "k8s.io/legacy-cloud-providers/aws" // registers the provider "aws"
)

// The controllers 1.20's generic cloud controller manager knows.
var controllers = []string{"cloud-node", "cloud-node-lifecycle", "service", "route"}

func main() {
	rand.Seed(time.Now().UnixNano())
	s, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := &cobra.Command{
		Use:          "cloud-controller-manager",
		Long:         "Kubernetes 1.20.2's cloud controller manager with its in-tree AWS provider (test peer).",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()
			cliflag.PrintFlags(cmd.Flags())
			return run(s)
		},
	}
	named := s.Flags(controllers, app.ControllersDisabledByDefault.List())
	verflag.AddFlags(named.FlagSet("global"))
	globalflag.AddGlobalFlags(named.FlagSet("global"), cmd.Name())
	for _, fs := range named.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	pflag.CommandLine.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

// run builds the configuration from the parsed flags, then initialises the provider they name.
func run(s *options.CloudControllerManagerOptions) error {
	c, err := s.Config(controllers, app.ControllersDisabledByDefault.List())
	if err != nil {
		return err
	}
	shared := c.ComponentConfig.KubeCloudShared
	cloud, err := cloudprovider.InitCloudProvider(shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile)
	if err != nil {
		return fmt.Errorf("cloud provider %q could not be initialized: %v", shared.CloudProvider.Name, err)
	}
	if cloud == nil {
		return fmt.Errorf("--cloud-provider=%q names no provider (this build has \"aws\")", shared.CloudProvider.Name)
	}
	if !cloud.HasClusterID() && !shared.AllowUntaggedCloud {
		return fmt.Errorf("no ClusterID found: set KubernetesClusterID in the cloud config, or --allow-untagged-cloud")
	}
	cloud.Initialize(c.ClientBuilder, wait.NeverStop)
	if informerUser, ok := cloud.(cloudprovider.InformerUser); ok {
		informerUser.SetInformers(c.SharedInformers)
	}
	completed := c.Complete()
	return app.Run(completed, app.DefaultControllerInitializers(completed, cloud), wait.NeverStop)
}
